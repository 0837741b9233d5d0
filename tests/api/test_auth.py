"""API keys: read < train < admin on /v1; health open; metrics and docs by setting.

The role matrix runs every role (and no key, and a wrong key) against every endpoint
class on one app with a trained model, whose requests are chosen so that an allowed
call leaves the state as the other cases expect it.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from app.deps import role_of
from app.logs import JsonFormatter
from app.settings import Settings, parse_api_keys
from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, forest, iris_csv, iris_frame, records

KEYS = "r-key:read,t-key:train,a-key:admin"
KEY_OF = {"read": "r-key", "train": "t-key", "admin": "a-key"}
CALLERS = ("no-key", "wrong-key", "read", "train", "admin")
MODULE = pytest.mark.asyncio(loop_scope="module")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _headers(caller: str) -> dict[str, str]:
    if caller == "no-key":
        return {}
    if caller == "wrong-key":
        return bearer("r-key-but-longer")
    return bearer(KEY_OF[caller])


ROW = records(iris_frame().head(2), IRIS_FEATURES)
# Endpoint class -> (the roles allowed, the calls and their status when allowed).
Call = tuple[str, str, dict[str, Any], int]
ENDPOINTS: dict[str, tuple[set[str], list[Call]]] = {
    "read": (
        {"read", "train", "admin"},
        [
            ("GET", "/v1/kinds", {}, 200),
            ("GET", "/v1/datasets", {}, 200),
            ("GET", "/v1/models", {}, 200),
            ("GET", "/v1/models/m", {}, 200),
            ("GET", "/v1/models/m/versions/latest", {}, 200),
            ("GET", "/v1/models/m/versions/1/artifact", {}, 200),
            ("GET", "/v1/models/m/versions/1/export/joblib", {}, 200),
            ("GET", "/v1/models/m/versions/1/export/skops", {}, 200),
            ("GET", "/v1/jobs", {}, 200),
        ],
    ),
    "predict": (
        {"read", "train", "admin"},
        [("POST", "/v1/models/m/versions/1/predict", {"json": {"instances": ROW}}, 200)],
    ),
    "train": (
        {"train", "admin"},
        [
            ("POST", "/v1/datasets", {"json": {"columns": ["a"], "rows": [[1.0]]}}, 201),
            ("POST", "/v1/models/m/versions", {"json": {}}, 422),  # checked, never queued
            ("POST", "/v1/jobs/job_000000000000000000000000/cancel", {}, 404),
        ],
    ),
    "admin": (
        {"admin"},
        [
            ("PUT", "/v1/models/m/aliases/prod", {"json": {"version": 1}}, 200),
            ("DELETE", "/v1/models/m/aliases/gone", {}, 404),
            ("DELETE", "/v1/models/m/versions/9", {}, 404),
            ("DELETE", "/v1/models/nope", {}, 404),
            ("DELETE", "/v1/datasets/ds_000000000000000000000000", {}, 404),
        ],
    ),
}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def keyed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    """One app with keys and a trained model "m" (version 1) for the whole matrix."""
    data = Path(tmp_path_factory.mktemp("auth")) / "data"
    async for _, api in started(make_settings(data, api_keys=KEYS)):
        files = {"file": ("t.csv", iris_csv().encode(), "text/csv")}
        upload = await api.client.post("/v1/datasets", files=files, headers=bearer("t-key"))
        assert upload.status_code == 201, upload.text
        body = forest(upload.json()["id"], n_estimators=3)
        trained = await api.client.post(
            "/v1/models/m/versions?wait=true", json=body, headers=bearer("t-key")
        )
        assert trained.status_code == 201, trained.text
        yield api


@pytest.mark.parametrize("endpoints", list(ENDPOINTS))
@pytest.mark.parametrize("caller", CALLERS)
@MODULE
async def test_role_matrix(keyed: Api, caller: str, endpoints: str) -> None:
    allowed_roles, calls = ENDPOINTS[endpoints]
    for method, path, kwargs, allowed_status in calls:
        response = await keyed.client.request(method, path, headers=_headers(caller), **kwargs)
        where = f"{caller} {method} {path}: {response.text[:200]}"
        if caller in ("no-key", "wrong-key"):
            assert response.status_code == 401, where
            assert response.json()["code"] == "unauthenticated", where
            assert response.headers["www-authenticate"].startswith("Bearer"), where
        elif caller in allowed_roles:
            assert response.status_code == allowed_status, where
        else:
            assert response.status_code == 403, where
            problem = response.json()
            assert problem["code"] == "forbidden", where
            assert f"'{caller}'" in problem["detail"], where


@MODULE
async def test_malformed_authorization_is_401(keyed: Api) -> None:
    for value in ("Basic r-key", "Bearer", "Bearer ", "r-key", "Bearer r-key r-key"):
        response = await keyed.client.get("/v1/models", headers={"Authorization": value})
        assert response.status_code == 401, value


@MODULE
async def test_health_and_readiness_stay_open(keyed: Api) -> None:
    for path in ("/healthz", "/readyz"):
        assert (await keyed.client.get(path)).status_code == 200, path


@MODULE
async def test_metrics_and_docs_open_by_default(keyed: Api) -> None:
    for path in ("/metrics", "/docs", "/openapi.json"):
        assert (await keyed.client.get(path)).status_code == 200, path


@MODULE
async def test_open_metrics_name_models_only_to_a_caller_with_a_key(keyed: Api) -> None:
    """As the landing page: a keyless scrape gets the totals, summed over the models."""
    body = {"instances": ROW}
    predicted = await keyed.client.post(
        "/v1/models/m/versions/1/predict", json=body, headers=bearer("r-key")
    )
    assert predicted.status_code == 200, predicted.text
    named = (await keyed.client.get("/metrics", headers=bearer("r-key"))).text
    per_model = _samples(named, "ensemble_predictions_total")
    assert {dict(labels)["model"] for labels in per_model} == {"m"}, per_model
    rows = sum(_samples(named, "ensemble_prediction_rows_total").values())
    anonymous = await keyed.client.get("/metrics")
    assert anonymous.status_code == 200
    assert 'model="' not in anonymous.text
    assert _samples(anonymous.text, "ensemble_predictions_total") == {(): sum(per_model.values())}
    assert _samples(anonymous.text, "ensemble_prediction_rows_total") == {(): rows}
    wrong = await keyed.client.get("/metrics", headers=bearer("r-key-but-longer"))
    assert wrong.status_code == 200 and 'model="' not in wrong.text
    assert _samples(anonymous.text, "ensemble_http_requests_total"), "other families stay"


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): float(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


async def test_metrics_and_docs_follow_their_settings(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(api_keys=KEYS, open_metrics=False, open_docs=False)
    async for _, api in started(settings):
        for path in ("/metrics", "/docs", "/openapi.json"):
            assert (await api.client.get(path)).status_code == 401, path
            assert (await api.client.get(path, headers=bearer("nope"))).status_code == 401, path
            assert (await api.client.get(path, headers=bearer("r-key"))).status_code == 200, path
        assert (await api.client.get("/healthz")).status_code == 200


def test_api_keys_setting_parses_pairs() -> None:
    assert parse_api_keys("a:read, b:admin,") == {"a": "read", "b": "admin"}
    assert parse_api_keys("with:colon:train") == {"with:colon": "train"}
    with pytest.raises(ValueError, match="key:role"):
        parse_api_keys("a:root")


def test_a_bad_keys_setting_does_not_print_the_keys() -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(api_keys="top-secret-key:root")
    assert "key:role" in str(raised.value) and "top-secret" not in str(raised.value)


def test_api_keys_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENSEMBLE_API_KEYS", "k1:train")
    monkeypatch.setenv("ENSEMBLE_MAX_CONCURRENT_JOBS", "2")
    settings = Settings()
    assert settings.api_keys == {"k1": "train"}
    assert settings.max_concurrent_jobs == 2
    assert "k1" not in repr(settings) and "k1" not in str(settings)


def test_keys_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = parse_api_keys("alpha:read,beta:train,gamma:admin")
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr("app.deps.hmac.compare_digest", spy)
    for guess, role in [("alpha", "read"), ("gamma", "admin"), ("alph", None), ("", None)]:
        compared.clear()
        assert role_of(keys, guess) == role
        # Every key is compared, whichever matches: no early exit, no dictionary lookup.
        assert [a for a, _ in compared] == [b"alpha", b"beta", b"gamma"], guess
    assert role_of(keys, "gämma") is None


async def test_no_keys_open_service_warns_at_start(
    settings_for: Callable[..., Settings], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="app"):
        async for _, api in started(settings_for()):
            assert (await api.client.delete("/v1/models/nope")).status_code == 404
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("no API keys" in m and "open" in m for m in warnings), warnings


async def test_keys_never_reach_the_log(
    settings_for: Callable[..., Settings], caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-admin-key-0123456789"
    settings = settings_for(api_keys=f"{secret}:admin,other-secret-key:read")
    with caplog.at_level(logging.DEBUG):
        async for _, api in started(settings):
            await api.client.get("/v1/models", headers=bearer(secret))
            await api.client.get("/v1/models", headers=bearer(secret + "x"))
            await api.client.get("/v1/models", headers={"Authorization": secret})
    formatter = JsonFormatter()
    text = "\n".join(formatter.format(r) for r in caplog.records)
    assert "/v1/models" in text  # the request lines are there ...
    assert secret not in text and "other-secret-key" not in text  # ... the keys are not
