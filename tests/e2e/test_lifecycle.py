"""A real server: restarts keep everything, a SIGKILLed server leaves no job running."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.e2e.server import Server, alive, cmdline, descendants

IRIS = "\n".join(
    ["a,b,label"] + [f"{i % 7 + 0.5},{(i * 3) % 11 + 0.25},{'xy'[i % 2]}" for i in range(120)]
)
ROW = {"a": 1.5, "b": 2.25}


def _upload(client: httpx.Client) -> str:
    files = {"file": ("t.csv", IRIS.encode(), "text/csv")}
    response = client.post("/v1/datasets", files=files, data={"name": "t"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _forest(dataset: str, n_estimators: int) -> dict[str, Any]:
    return {
        "dataset_id": dataset,
        "target": "label",
        "ensemble": {"kind": "random_forest", "params": {"n_estimators": n_estimators}},
        "random_state": 3,
    }


def _wait(
    client: httpx.Client, job_id: str, until: tuple[str, ...], timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in until or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def _running_with_progress(client: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] == "running" and job["progress"]["done"] > 0:
            return job
        assert job["status"] in ("queued", "running"), job
        time.sleep(0.05)
    raise AssertionError("the job never made progress")


def test_stop_and_restart_keeps_everything(servers: Callable[..., Server]) -> None:
    first = servers()
    with first.client() as client:
        dataset = _upload(client)
        trained = client.post("/v1/models/keep/versions?wait=true", json=_forest(dataset, 20))
        assert trained.status_code == 201, trained.text
        assert (
            client.put("/v1/models/keep/aliases/production", json={"version": 1}).status_code == 200
        )
        before = client.post(
            "/v1/models/keep/versions/production/predict", json={"instances": [ROW]}
        )
        version = client.get("/v1/models/keep/versions/1").json()
    first.stop()
    second = servers()
    with second.client() as client:
        assert client.get(f"/v1/datasets/{dataset}").status_code == 200
        assert client.get("/v1/models/keep").json()["aliases"] == {"production": 1}
        assert client.get("/v1/models/keep/versions/1").json() == version
        after = client.post(
            "/v1/models/keep/versions/production/predict", json={"instances": [ROW]}
        )
        assert after.json() == before.json()
        # Numbering continues after the restart.
        again = client.post("/v1/models/keep/versions?wait=true", json=_forest(dataset, 5))
        assert again.json()["version"] == 2


def test_sigkilled_server_leaves_its_job_failed_after_restart(
    servers: Callable[..., Server],
) -> None:
    first = servers()
    with first.client() as client:
        dataset = _upload(client)
        job = client.post("/v1/models/crash/versions", json=_forest(dataset, 5000)).json()
        _running_with_progress(client, job["id"])
    workers = [p for p in descendants(first.pid) if "forkserver" in cmdline(p)]
    assert workers, "expected the fork server and a training worker"
    first.kill_server_only()
    deadline = time.monotonic() + 10
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in workers), "worker processes outlived the server"
    second = servers()
    with second.client() as client:
        ended = client.get(f"/v1/jobs/{job['id']}").json()
        assert ended["status"] == "failed"
        assert ended["error"]["code"] == "interrupted"
        assert client.get("/v1/jobs", params={"status": "running"}).json() == []
        assert client.get("/v1/models/crash").status_code == 404
        # The reserved number stays used.
        again = client.post("/v1/models/crash/versions?wait=true", json=_forest(dataset, 5))
        assert again.json()["version"] == 2


def test_sigkilled_worker_fails_its_job_at_once(servers: Callable[..., Server]) -> None:
    server = servers()
    with server.client() as client:
        dataset = _upload(client)
        job = client.post("/v1/models/oom/versions", json=_forest(dataset, 5000)).json()
        _running_with_progress(client, job["id"])
        forkserver = [p for p in descendants(server.pid) if "forkserver" in cmdline(p)]
        workers = [w for p in forkserver for w in descendants(p)]
        assert len(workers) == 1, workers
        os.kill(workers[0], signal.SIGKILL)
        ended = _wait(client, job["id"], ("succeeded", "failed", "cancelled"), timeout=10)
        assert ended["status"] == "failed"
        assert ended["error"]["code"] == "worker_crashed"
        assert client.get("/readyz").status_code == 200


def test_cancel_a_running_job(servers: Callable[..., Server]) -> None:
    server = servers()
    with server.client() as client:
        dataset = _upload(client)
        job = client.post("/v1/models/stop/versions", json=_forest(dataset, 5000)).json()
        _running_with_progress(client, job["id"])
        asked = time.monotonic()
        cancel = client.post(f"/v1/jobs/{job['id']}/cancel")
        assert cancel.status_code == 202 and cancel.json()["cancel_requested"]
        ended = _wait(client, job["id"], ("succeeded", "failed", "cancelled"), timeout=15)
        assert ended["status"] == "cancelled"
        assert time.monotonic() - asked < 5
        assert client.get("/v1/models/stop").status_code == 404
