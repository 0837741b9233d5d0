"""Two real uvicorn processes with their own data folders, one PostgreSQL database and one
S3 bucket (moto): they act as one service.

What A trains, B serves (equal predictions); an alias moved on A is followed by B within
a second, a weighted alias with a shadow too (the shadow's counts of both adding up); a
version, then the model, deleted on A is a 404 on B although B had it in its
cache; a job submitted on A is read and cancelled through B; and restarting B (its
start-up recovery) leaves A's running job running: the replicas see each other's leases
in the database, not lock files in a folder they do not share.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from sklearn.datasets import load_iris

from ensembles.registry.stores import StoreConfig
from ensembles.routing import choose_version
from tests.e2e.server import Server
from tests.replicas import SharedBackends

BOUND_S = 60.0
FOLLOW_S = 1.0  # API.md, Scale-out: followed by the others within one second
POLL_S = 0.02
PREDICT = "/v1/models/iris/versions/{ref}/predict"

_IRIS = load_iris(as_frame=True).frame
FEATURES = [str(c) for c in _IRIS.columns if c != "target"]
TABLE = {"columns": [*FEATURES, "target"], "rows": _IRIS.to_numpy().tolist()}
# Noise: deep trees on 4,000 rows, 5,000 of them, keep a worker busy far longer than a test.
_NOISE = np.random.default_rng(0).random((4000, 5))
SLOW_TABLE = {"columns": ["a", "b", "c", "d", "target"], "rows": _NOISE.round(6).tolist()}
ROWS = [dict(zip(FEATURES, row, strict=True)) for row in _IRIS[FEATURES].iloc[::10].to_numpy()]


@pytest.fixture
def start(
    tmp_path: Path, postgres_url: str, s3_store: StoreConfig
) -> Iterator[Callable[[str], Server]]:
    """Start a replica named ``name`` (its data folder ``tmp_path/name``) on the shared
    database and bucket; every one started is stopped at the end."""
    shared = SharedBackends(postgres_url, s3_store)
    started: list[Server] = []

    def run(name: str) -> Server:
        log = tmp_path / f"{name}-{len(started)}.log"
        server = Server(tmp_path / name, log, **shared.environment())
        started.append(server)
        return server.start()

    yield run
    for server in started:
        server.stop()


def _forest(dataset_id: str, n_estimators: int) -> dict[str, Any]:
    return {
        "dataset_id": dataset_id,
        "target": "target",
        "ensemble": {"kind": "random_forest", "params": {"n_estimators": n_estimators}},
        "random_state": 7,
    }


def _upload(client: httpx.Client, table: dict[str, Any] = TABLE) -> str:
    response = client.post("/v1/datasets", json={"name": "t", **table})
    assert response.status_code == 201, response.text
    dataset_id: str = response.json()["id"]
    return dataset_id


def _train(client: httpx.Client, dataset_id: str, n_estimators: int) -> int:
    response = client.post(
        "/v1/models/iris/versions?wait=true", json=_forest(dataset_id, n_estimators)
    )
    assert response.status_code == 201, response.text
    version: int = response.json()["version"]
    return version


def _predict(client: httpx.Client, ref: str | int, key: str | None = None) -> httpx.Response:
    headers = {"X-Routing-Key": key} if key is not None else {}
    return client.post(PREDICT.format(ref=ref), json={"instances": ROWS}, headers=headers)


def _served_version(client: httpx.Client, ref: str | int, key: str | None = None) -> int | None:
    response = _predict(client, ref, key)
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    version: int = response.json()["version"]
    return version


def _staleness(
    client: httpx.Client, ref: str, expected: int | None, key: str | None = None
) -> float:
    """Seconds from now until a request *sent* by B sees ``expected`` (polled; bounded).

    Measured at the start of the request that first saw it, so a slow answer on a busy
    machine does not count as B lagging behind the database.
    """
    moved = time.monotonic()
    while True:
        sent = time.monotonic()
        if _served_version(client, ref, key) == expected:
            return sent - moved
        if sent - moved > BOUND_S:
            raise AssertionError(f"B still does not serve {expected} for {ref!r}")
        time.sleep(POLL_S)


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_what_a_trains_b_serves_and_follows(start: Callable[[str], Server]) -> None:
    a, b = start("a"), start("b")
    with a.client() as on_a, b.client() as on_b:
        dataset_id = _upload(on_a)
        first = _train(on_a, dataset_id, 5)
        second = _train(on_a, dataset_id, 9)
        assert (first, second) == (1, 2)

        # Trained through A, served by B: the same predictions, from the same bytes.
        for ref in (first, second, "latest"):
            from_a, from_b = _predict(on_a, ref), _predict(on_b, ref)
            assert from_a.status_code == from_b.status_code == 200, from_b.text
            assert from_b.json()["predictions"] == from_a.json()["predictions"]
            assert from_b.json()["version"] == from_a.json()["version"]
        assert on_b.get(f"/v1/datasets/{dataset_id}").json() == (
            on_a.get(f"/v1/datasets/{dataset_id}").json()
        )

        # An alias moved on A is followed by B within a second (B serves it from its cache).
        assert on_a.put("/v1/models/iris/aliases/prod", json={"version": first}).status_code == 200
        assert _staleness(on_b, "prod", first) < FOLLOW_S
        assert _served_version(on_b, "prod") == first
        assert on_a.put("/v1/models/iris/aliases/prod", json={"version": second}).status_code == (
            200
        )
        assert _staleness(on_b, "prod", second) < FOLLOW_S
        assert on_a.delete("/v1/models/iris/aliases/prod").status_code == 204
        assert _staleness(on_b, "prod", None) < FOLLOW_S

        # A weighted alias with a shadow, set on A: followed by B within a second, and the
        # shadow's counts of both replicas add up in the database.
        _weighted_alias_and_shadow_are_shared(on_a, on_b, first, second)

        # Deleted on A: a 404 on B, although B has just served (and cached) it.
        assert _served_version(on_b, second) == second
        assert on_a.delete(f"/v1/models/iris/versions/{second}").status_code == 204
        gone = _predict(on_b, second)
        assert gone.status_code == 404, gone.text
        assert gone.json()["code"] == "not_found"
        assert on_b.get(f"/v1/models/iris/versions/{second}/artifact").status_code == 404
        assert _served_version(on_b, "latest") == first

        assert _served_version(on_b, first) == first
        assert on_a.delete("/v1/models/iris").status_code == 204
        for ref in (first, "latest"):
            response = _predict(on_b, ref)
            assert response.status_code == 404, response.text
        assert on_b.get("/v1/models/iris").status_code == 404


def _weighted_alias_and_shadow_are_shared(
    on_a: httpx.Client, on_b: httpx.Client, first: int, second: int
) -> None:
    weights = [(first, 0.5), (second, 0.5)]
    keys = {choose_version(weights, f"user-{i}"): f"user-{i}" for i in range(40)}
    to_second = keys[second]
    body: dict[str, Any] = {"versions": {str(first): 0.5, str(second): 0.5}}
    assert on_a.put("/v1/models/iris/aliases/split", json=body).status_code == 200
    assert _staleness(on_b, "split", second, to_second) < FOLLOW_S
    assert _served_version(on_b, "split", keys[first]) == first
    # The shadow's counts start when it is set: only what follows counts.
    assert on_a.put(
        "/v1/models/iris/aliases/split", json={**body, "shadow": first}
    ).status_code == (200)
    for client in (on_a, on_b, on_b):
        for key in keys.values():
            assert _served_version(client, "split", key) in (first, second)
    sent = 3 * len(keys)

    def counted() -> bool:
        stats = on_a.get("/v1/models/iris/aliases/split/shadow").json()
        return bool(stats["requests"] + stats["dropped"] == sent)

    _until(counted, "the shadow counts of both replicas")
    stats = on_b.get("/v1/models/iris/aliases/split/shadow").json()
    assert (stats["shadow"], stats["requests"], stats["errors"]) == (first, sent, 0)
    assert on_a.put("/v1/models/iris/aliases/split", json={"version": first}).status_code == 200
    assert _staleness(on_b, "split", first, to_second) < FOLLOW_S
    assert on_b.get("/v1/models/iris/aliases/split/shadow").status_code == 404
    assert on_a.delete("/v1/models/iris/aliases/split").status_code == 204


def test_a_job_of_a_is_read_and_cancelled_through_b_and_survives_b_restarting(
    start: Callable[[str], Server],
) -> None:
    a, b = start("a"), start("b")
    with a.client() as on_a:
        dataset_id = _upload(on_a, SLOW_TABLE)
        spec = {**_forest(dataset_id, 5000), "task": "regression"}
        submitted = on_a.post("/v1/models/slow/versions", json=spec)
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]
        _until(lambda: on_a.get(f"/v1/jobs/{job_id}").json()["status"] == "running", "running")

        with b.client() as on_b:
            seen = on_b.get(f"/v1/jobs/{job_id}")
            assert seen.status_code == 200 and seen.json()["status"] == "running", seen.text
            assert seen.json()["model"] == "slow"

        # Restarting B runs its start-up recovery: A is alive, so its job stays running.
        assert b.stop() == 0, b.log()
        b = start("b")
        with b.client() as on_b:
            assert on_b.get(f"/v1/jobs/{job_id}").json()["status"] == "running"
            assert on_a.get(f"/v1/jobs/{job_id}").json()["status"] == "running"
            running = on_b.get("/v1/jobs", params={"status": "running"}).json()
            assert [job["id"] for job in running] == [job_id]

            # Cancelled through B: A's runner stops its worker.
            cancel = on_b.post(f"/v1/jobs/{job_id}/cancel")
            assert cancel.status_code in (200, 202), cancel.text
            _until(
                lambda: on_b.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled",
                "the cancel to reach A's worker",
            )
        assert on_a.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"
        assert on_a.get("/v1/models/slow/versions").status_code == 404  # nothing published
