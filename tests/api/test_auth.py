"""API keys: read < train < admin on /v1; health open; metrics and docs by setting."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from app.settings import Settings, parse_api_keys
from tests.api.conftest import started
from tests.api.support import Api, forest, iris_csv

KEYS = "r-key:read,t-key:train,a-key:admin"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def locked(settings_for: Callable[..., Settings]) -> AsyncIterator[Api]:
    async for _, api in started(settings_for(api_keys=KEYS)):
        yield api


def test_api_keys_setting_parses_pairs() -> None:
    assert parse_api_keys("a:read, b:admin,") == {"a": "read", "b": "admin"}
    with pytest.raises(ValueError, match="key:role"):
        parse_api_keys("a:root")


def test_api_keys_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENSEMBLE_API_KEYS", "k1:train")
    monkeypatch.setenv("ENSEMBLE_MAX_CONCURRENT_JOBS", "2")
    settings = Settings()
    assert settings.api_keys == {"k1": "train"}
    assert settings.max_concurrent_jobs == 2


async def test_missing_or_unknown_key_401(locked: Api) -> None:
    response = await locked.client.get("/v1/models")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["code"] == "unauthenticated"
    unknown = await locked.client.get("/v1/models", headers=bearer("nope"))
    assert unknown.status_code == 401


async def test_read_role_may_get_and_predict_only(locked: Api) -> None:
    assert (await locked.client.get("/v1/models", headers=bearer("r-key"))).status_code == 200
    assert (await locked.client.get("/v1/kinds", headers=bearer("r-key"))).status_code == 200
    files = {"file": ("t.csv", iris_csv().encode(), "text/csv")}
    upload = await locked.client.post("/v1/datasets", files=files, headers=bearer("r-key"))
    assert upload.status_code == 403
    assert upload.json()["code"] == "forbidden"
    predict = await locked.client.post(
        "/v1/models/x/versions/1/predict", json={"instances": []}, headers=bearer("r-key")
    )
    assert predict.status_code == 404  # allowed; the model does not exist


async def test_train_role_uploads_trains_cancels_but_does_not_delete(locked: Api) -> None:
    files = {"file": ("t.csv", iris_csv().encode(), "text/csv")}
    upload = await locked.client.post("/v1/datasets", files=files, headers=bearer("t-key"))
    assert upload.status_code == 201
    dataset = upload.json()["id"]
    trained = await locked.client.post(
        "/v1/models/m/versions?wait=true",
        json=forest(dataset, n_estimators=3),
        headers=bearer("t-key"),
    )
    assert trained.status_code == 201
    for path in (f"/v1/datasets/{dataset}", "/v1/models/m/versions/1", "/v1/models/m"):
        assert (await locked.client.delete(path, headers=bearer("t-key"))).status_code == 403
    alias = await locked.client.put(
        "/v1/models/m/aliases/prod", json={"version": 1}, headers=bearer("t-key")
    )
    assert alias.status_code == 403
    alias = await locked.client.put(
        "/v1/models/m/aliases/prod", json={"version": 1}, headers=bearer("a-key")
    )
    assert alias.status_code == 200
    assert (
        await locked.client.delete("/v1/models/m/aliases/prod", headers=bearer("a-key"))
    ).status_code == 204
    assert (await locked.client.delete("/v1/models/m", headers=bearer("a-key"))).status_code == 204


async def test_health_metrics_and_docs_open_by_default(locked: Api) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/docs", "/openapi.json"):
        assert (await locked.client.get(path)).status_code == 200, path


async def test_metrics_and_docs_follow_their_settings(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(api_keys=KEYS, open_metrics=False, open_docs=False)
    async for _, api in started(settings):
        for path in ("/metrics", "/docs", "/openapi.json"):
            assert (await api.client.get(path)).status_code == 401, path
            assert (await api.client.get(path, headers=bearer("r-key"))).status_code == 200, path
        assert (await api.client.get("/healthz")).status_code == 200
