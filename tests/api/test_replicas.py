"""Two instances of the service with their own data folders, one database and one object
store (as on two machines): they act as one service.

What one trains, the other serves; an alias moved, a version or a model deleted through
one is followed by the other at its next request, although it had the model in its cache:
its cache is keyed by what the registry says (model, version, sha256), and the version
reference is resolved against the database on every request unless the database is
known unchanged since (SQLite's ``data_version``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from fastapi import FastAPI

from app.services.container import Services
from ensembles.routing import choose_version
from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, forest, iris_frame, records
from tests.replicas import SharedBackends

Replica = tuple[FastAPI, Api]
ROWS = records(iris_frame().iloc[::15], IRIS_FEATURES)


@pytest.fixture
async def replicas(tmp_path: Path, shared_backends: SharedBackends) -> AsyncIterator[list[Replica]]:
    async with AsyncExitStack() as stack:
        pair: list[Replica] = []
        for name in ("a", "b"):
            settings = make_settings(tmp_path / name, **shared_backends.settings())
            pair.append(await stack.enter_async_context(asynccontextmanager(started)(settings)))
        yield pair


def _cached(app: FastAPI, model: str, version: int) -> bool:
    services: Services = app.state.services
    record = services.registry.get_version(model, version)
    return (model, version, record.artifact_sha256) in services.cache


async def _predict(api: Api, ref: str | int, model: str = "iris") -> tuple[int, object]:
    response = await api.predict(model, ref, {"instances": ROWS})
    body = response.json()
    return response.status_code, body.get("version") if response.status_code == 200 else body[
        "code"
    ]


async def test_what_one_replica_trains_the_other_serves(replicas: list[Replica]) -> None:
    (_, a), (app_b, b) = replicas
    dataset_id = await a.iris()
    version = await a.train("iris", forest(dataset_id))
    from_a = await a.predict("iris", 1, {"instances": ROWS})
    from_b = await b.predict("iris", 1, {"instances": ROWS})
    assert from_a.status_code == from_b.status_code == 200, from_b.text
    assert from_b.json()["predictions"] == from_a.json()["predictions"]
    assert _cached(app_b, "iris", 1)
    # B sees the dataset A stored, and trains from it too.
    assert (await b.client.get(f"/v1/datasets/{dataset_id}")).json()["sha256"]
    second = await b.train("iris", forest(dataset_id, n_estimators=5))
    assert (version["version"], second["version"]) == (1, 2)
    assert await _predict(a, "latest") == (200, 2)


async def test_an_alias_moved_on_one_replica_is_followed_by_the_other_at_once(
    replicas: list[Replica],
) -> None:
    (_, a), (app_b, b) = replicas
    dataset_id = await a.iris()
    await a.train("iris", forest(dataset_id))
    await a.train("iris", forest(dataset_id, n_estimators=5))
    assert (
        await a.client.put("/v1/models/iris/aliases/prod", json={"version": 1})
    ).status_code == 200
    assert await _predict(b, "prod") == (200, 1)
    assert await _predict(b, "prod") == (200, 1)  # now answered from B's memory
    assert _cached(app_b, "iris", 1)

    assert (
        await a.client.put("/v1/models/iris/aliases/prod", json={"version": 2})
    ).status_code == 200
    assert await _predict(b, "prod") == (200, 2)
    assert (await a.client.delete("/v1/models/iris/aliases/prod")).status_code == 204
    assert await _predict(b, "prod") == (404, "not_found")


async def test_a_weighted_alias_and_its_shadow_are_shared_by_the_replicas(
    replicas: list[Replica],
) -> None:
    (_, a), (_, b) = replicas
    dataset_id = await a.iris()
    await a.train("iris", forest(dataset_id))
    await a.train("iris", forest(dataset_id, n_estimators=5))
    keys = {choose_version([(1, 0.5), (2, 0.5)], f"k{i}"): f"k{i}" for i in range(40)}
    body = {"versions": {"1": 0.5, "2": 0.5}, "shadow": 2}
    assert (await a.client.put("/v1/models/iris/aliases/prod", json=body)).status_code == 200
    assert (await b.client.get("/v1/models/iris/aliases/prod")).json()["versions"] == {
        "1": 0.5,
        "2": 0.5,
    }
    for replica, times in ((a, 1), (b, 2)):
        for _ in range(times):
            for version, key in keys.items():
                assert await _keyed(replica, key) == version
    deadline = time.monotonic() + 60
    while (stats := (await a.client.get("/v1/models/iris/aliases/prod/shadow")).json())[
        "requests"
    ] < 6:  # B's thread adds its counts to the database row after its answers
        assert time.monotonic() < deadline, stats
        await asyncio.sleep(0.05)
    assert (stats["requests"], stats["rows"], stats["errors"]) == (6, 6 * len(ROWS), 0)
    # Back to one version through B: A follows at once.
    assert (
        await b.client.put("/v1/models/iris/aliases/prod", json={"version": 1})
    ).status_code == (200)
    assert await _keyed(a, keys[2]) == 1
    assert (await a.client.get("/v1/models/iris/aliases/prod/shadow")).status_code == 404


async def _keyed(api: Api, key: str) -> int:
    response = await api.client.post(
        "/v1/models/iris/versions/prod/predict",
        json={"instances": ROWS},
        headers={"X-Routing-Key": key},
    )
    assert response.status_code == 200, response.text
    version: int = response.json()["version"]
    return version


async def test_a_version_or_model_deleted_on_one_replica_is_gone_from_the_other(
    replicas: list[Replica],
) -> None:
    (_, a), (app_b, b) = replicas
    dataset_id = await a.iris()
    await a.train("iris", forest(dataset_id))
    await a.train("iris", forest(dataset_id, n_estimators=5))
    for ref in (1, 2, "latest", 1, 2):
        assert (await _predict(b, ref))[0] == 200
    assert _cached(app_b, "iris", 1) and _cached(app_b, "iris", 2)

    assert (await a.client.delete("/v1/models/iris/versions/2")).status_code == 204
    assert await _predict(b, 2) == (404, "not_found")
    assert await _predict(b, "latest") == (200, 1)
    assert (await b.client.get("/v1/models/iris/versions/2/artifact")).status_code == 404

    assert (await a.client.delete("/v1/models/iris")).status_code == 204
    assert await _predict(b, 1) == (404, "not_found")
    assert await _predict(b, "latest") == (404, "not_found")
