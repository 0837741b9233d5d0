"""Optional extras (issue 20, item 10): `make run` installs the service without them, so
the service must start and serve without their modules, and a setting that needs one
names the extra to install before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from app.server.preflight import EXTRAS, check_extras, missing_extra
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL_MODULES = ("distributed", "dask", "boto3", "botocore", "psycopg")


def _project() -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def test_the_extras_the_settings_name_exist_and_are_not_runtime_dependencies() -> None:
    project = _project()
    extras = project["optional-dependencies"]
    assert isinstance(extras, dict)
    runtime = " ".join(str(d) for d in project["dependencies"])  # type: ignore[attr-defined]
    (own,) = [d for d in extras["dev"] if d.startswith("ensemble-service[")]
    assert {"postgres", "s3", "dask"} <= set(own[len("ensemble-service[") : -1].split(","))
    for _, _module, extra in EXTRAS.values():
        assert extra in extras, extra
        for requirement in extras[extra]:
            name = requirement.split("[")[0].split(">")[0].split("<")[0]
            assert name not in runtime, f"{name} is a runtime dependency and in [{extra}]"
    assert "boto3" not in runtime and "distributed" not in runtime and "psycopg" not in runtime


def test_a_missing_extra_is_named_with_the_command_that_installs_it() -> None:
    problem = missing_extra("ENSEMBLE_DASK_SCHEDULER", "no_such_module_installed_here", "dask")
    assert problem is not None
    assert problem.startswith("ENSEMBLE_DASK_SCHEDULER needs the 'dask' extra")
    assert "pip install -e '.[dask]'" in problem
    assert missing_extra("ENSEMBLE_OBJECT_STORE", "boto3", "s3") is None  # installed (dev)


def test_settings_that_need_no_extra_are_not_checked(tmp_path: Path) -> None:
    assert check_extras(Settings(data_dir=tmp_path)) is None
    wants = Settings(data_dir=tmp_path, dask_scheduler="tcp://127.0.0.1:8786")
    assert check_extras(wants) is None  # distributed is installed with the dev extra


def test_the_service_starts_and_serves_without_the_optional_modules(tmp_path: Path) -> None:
    """What `make run` has: the app imports and answers without any optional module."""
    script = (
        "import sys\n"
        "from fastapi.testclient import TestClient\n"
        "from app.main import create_app\n"
        "with TestClient(create_app()) as client:\n"
        "    assert client.get('/healthz').status_code == 200\n"
        "    assert client.get('/readyz').status_code == 200\n"
        f"print(sorted(m for m in {OPTIONAL_MODULES!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "ENSEMBLE_DATA_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    # No training here: the fork server's preload (another process, ~5 s of CPU, which it
    # would finish before noticing this one gone) proves nothing about this one's imports.
    env["ENSEMBLE_PRELOAD_TRAINING"] = "false"
    for name in ("ENSEMBLE_DATABASE_URL", "ENSEMBLE_OBJECT_STORE", "ENSEMBLE_DASK_SCHEDULER"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
