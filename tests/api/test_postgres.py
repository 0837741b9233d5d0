"""The service on a real PostgreSQL server: it trains and serves as on SQLite, and when
the database goes away it answers 503 problems (readiness names the database) at once,
then recovers by itself when the database is back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.conftest import make_settings, started
from tests.api.support import Api, forest, iris_frame, records
from tests.postgres import PostgresServer

NO_HANG_S = 60.0  # a guard against hanging, far above the connect timeout: not a timing test
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of this test's own, which it may stop (the session's one stays up)."""
    server = PostgresServer()
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture
async def on_postgres(tmp_path: Path, own_server: PostgresServer) -> AsyncIterator[Api]:
    url = own_server.url(own_server.create_database())
    async for _, api in started(make_settings(tmp_path / "data", database_url=url)):
        yield api


async def _call(api: Api, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return await asyncio.wait_for(api.client.request(method, path, **kwargs), NO_HANG_S)


def _rows() -> dict[str, Any]:
    return {"instances": records(iris_frame().head(3), FEATURES)}


async def test_trains_versions_aliases_and_predicts_on_postgres(on_postgres: Api) -> None:
    api = on_postgres
    dataset = await api.iris()
    first = await api.train("iris", forest(dataset, n_estimators=5))
    second = await api.train("iris", forest(dataset, n_estimators=7))
    assert (first["version"], second["version"]) == (1, 2)
    moved = await api.client.put("/v1/models/iris/aliases/production", json={"version": 1})
    assert moved.status_code == 200, moved.text
    predicted = await api.predict("iris", "production", _rows())
    assert predicted.status_code == 200, predicted.text
    assert (await api.client.get("/readyz")).json()["checks"]["database"] == "ok"


async def test_a_database_that_goes_away_gives_503_problems_then_recovers(
    on_postgres: Api, own_server: PostgresServer
) -> None:
    api = on_postgres
    dataset = await api.iris()
    await api.train("iris", forest(dataset, n_estimators=5))
    assert (await api.predict("iris", 1, _rows())).status_code == 200

    own_server.stop()  # fast shutdown: every connection of the pool is cut
    ready = await _call(api, "GET", "/readyz")
    assert ready.status_code == 503
    assert ready.headers["content-type"] == "application/problem+json"
    assert ready.json()["checks"]["database"] != "ok"
    assert "database" in ready.json()["detail"]
    for method, path, body in [
        ("GET", "/v1/models", None),
        ("GET", "/v1/models/iris/versions/1", None),
        ("POST", "/v1/models/iris/versions/1/predict", _rows()),
        ("POST", "/v1/models/iris/versions", forest(dataset)),
        ("GET", f"/v1/datasets/{dataset}", None),
    ]:
        response = await _call(api, method, path, json=body)
        assert response.status_code == 503, (path, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["code"] == "storage", problem
        assert "Traceback" not in response.text

    own_server.start()  # same port: the pool reconnects, nothing to restart
    assert (await _call(api, "GET", "/readyz")).status_code == 200
    assert (await api.predict("iris", 1, _rows())).status_code == 200
    again = await api.train("iris", forest(dataset, n_estimators=5))
    assert again["version"] == 2  # the refused submit reserved nothing


async def test_weighted_aliases_and_shadow_counts_on_postgres(on_postgres: Api) -> None:
    """The rollout tables migrate on PostgreSQL, and shadow counts add up in its row."""
    api = on_postgres
    dataset = await api.iris()
    for trees in (3, 5):
        await api.train("iris", forest(dataset, n_estimators=trees))
    body = {"versions": {"1": 0.5, "2": 0.5}, "shadow": 2}
    put = await _call(api, "PUT", "/v1/models/iris/aliases/prod", json=body)
    assert put.status_code == 200, put.text
    assert put.json()["versions"] == {"1": 0.5, "2": 0.5}
    answered = set()
    for i in range(8):
        response = await _call(
            api,
            "POST",
            "/v1/models/iris/versions/prod/predict",
            json=_rows(),
            headers={"X-Routing-Key": f"user-{i}"},
        )
        assert response.status_code == 200, response.text
        answered.add(response.json()["version"])
    assert answered <= {1, 2}
    for _ in range(1200):  # the shadow thread counts after the answers were sent
        stats = (await _call(api, "GET", "/v1/models/iris/aliases/prod/shadow")).json()
        if stats["requests"] == 8:
            break
        await asyncio.sleep(0.05)
    assert (stats["requests"], stats["rows"], stats["errors"]) == (8, 24, 0)
    plain = await _call(api, "PUT", "/v1/models/iris/aliases/prod", json={"version": 1})
    assert plain.json() == {"model": "iris", "alias": "prod", "version": 1}
    assert (await _call(api, "DELETE", "/v1/models/iris")).status_code == 204
