"""deploy/compose.yaml: valid Compose, and wired the way docs/scale-out.md says.

The schema check uses the Compose specification's own JSON schema as vendored by
check-jsonschema (``vendor.compose-spec``), so "valid" means what Compose tools accept,
not what we think they accept.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
API_REPLICAS = ("api-1", "api-2")
DASK_WORKERS = ("dask-worker-1", "dask-worker-2")


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.compose-spec",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text())  # resolves the <<: merge keys
    assert isinstance(document, dict)
    return document


def test_the_compose_file_follows_the_compose_specification() -> None:
    result = validate(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    broken.write_text(COMPOSE.read_text().replace("    healthcheck:\n", "    healthchek:\n", 1))
    result = validate(broken)
    assert result.returncode != 0
    assert "healthchek" in result.stdout + result.stderr


def test_python_services_run_the_projects_own_image(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in (*API_REPLICAS, *DASK_WORKERS, "dask-scheduler"):
        assert services[name]["build"]["context"] == "..", name
        assert (DEPLOY / services[name]["build"]["context"] / "Dockerfile").is_file()
        assert services[name]["image"] == services["api-1"]["image"], name


def test_replicas_share_the_registry_store_and_cluster_but_not_their_folders(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    shared = (
        "ENSEMBLE_DATABASE_URL",
        "ENSEMBLE_OBJECT_STORE",
        "ENSEMBLE_S3_ENDPOINT_URL",
        "ENSEMBLE_DASK_SCHEDULER",
    )
    first = services["api-1"]["environment"]
    assert first["ENSEMBLE_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert first["ENSEMBLE_OBJECT_STORE"].startswith("s3://")
    for name in (*API_REPLICAS, *DASK_WORKERS):
        for key in shared:
            assert services[name]["environment"][key] == first[key], (name, key)
    folders = [
        services[name]["volumes"][0].split(":")[0] for name in (*API_REPLICAS, *DASK_WORKERS)
    ]
    assert len(set(folders)) == len(folders), "each replica and worker has its own local folder"


def test_every_ensemble_setting_named_is_one_the_service_reads(compose: dict[str, Any]) -> None:
    known = {f"ENSEMBLE_{field.upper()}" for field in Settings.model_fields}
    named = {
        key
        for service in compose["services"].values()
        for key in (service.get("environment") or {})
        if key.startswith("ENSEMBLE_")
    }
    assert named, "the services are configured through ENSEMBLE_* settings"
    assert named <= known, named - known


def test_every_long_running_service_has_a_health_check(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if service.get("restart") == "no":  # a one-shot job
            continue
        assert "test" in service.get("healthcheck", {}), name


def test_replicas_wait_for_their_dependencies_to_be_healthy(compose: dict[str, Any]) -> None:
    for name in API_REPLICAS:
        depends = compose["services"][name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["dask-scheduler"]["condition"] == "service_healthy"
        assert depends["create-bucket"]["condition"] == "service_completed_successfully"


def test_the_proxy_balances_over_exactly_the_replicas() -> None:
    config = (DEPLOY / "nginx.conf").read_text()
    upstream = re.findall(r"^\s*server\s+([\w-]+):8000\b", config, flags=re.MULTILINE)
    assert sorted(upstream) == sorted(API_REPLICAS)


def test_the_example_environment_sets_every_required_variable() -> None:
    required = set(re.findall(r"\$\{(\w+):\?", COMPOSE.read_text()))
    example = {
        line.split("=", 1)[0]
        for line in (DEPLOY / "example.env").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert required, "secrets have no defaults in compose.yaml"
    assert required <= example, required - example
