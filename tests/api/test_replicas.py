"""Two instances of the service with their own data folders, one database and one object
store (as on two machines): they act as one service.

What one trains, the other serves; an alias moved, a version or a model deleted through
one is followed by the other at its next request, although it had the model in its cache:
its cache is keyed by what the registry says (model, version, sha256), and the version
reference is resolved against the database on every request unless the database is
known unchanged since (SQLite's ``data_version``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from fastapi import FastAPI

from app.services.container import Services
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
