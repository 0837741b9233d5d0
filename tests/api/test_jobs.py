"""Jobs: list, get, progress, cancel (queued and running), crashes and timeouts."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable

import pytest
from fastapi import FastAPI

from app.jobs import runner as runner_module
from app.settings import Settings
from tests.api.conftest import started
from tests.api.support import Api, forest, locs

SLOW = 3000  # trees: several seconds on iris, growing in chunks with progress


async def _running(api: Api, job_id: str) -> dict[str, object]:
    job = await api.wait_job(job_id, timeout=30, until=("running", "succeeded", "failed"))
    assert job["status"] == "running", job
    return job


async def test_get_and_list_jobs(api: Api) -> None:
    dataset = await api.iris()
    first = (await api.submit("a", forest(dataset, n_estimators=3))).json()
    second = (await api.submit("b", forest(dataset, n_estimators=3))).json()
    await api.wait_job(first["id"])
    await api.wait_job(second["id"])
    listed = await api.client.get("/v1/jobs")
    assert listed.status_code == 200
    assert [j["id"] for j in listed.json()] == [second["id"], first["id"]]
    succeeded = await api.client.get("/v1/jobs", params={"status": "succeeded", "model": "a"})
    assert [j["id"] for j in succeeded.json()] == [first["id"]]
    running = await api.client.get("/v1/jobs", params={"status": "running"})
    assert running.json() == []
    bad = await api.client.get("/v1/jobs", params={"status": "sleeping"})
    assert bad.status_code == 422 and locs(bad) == [["query", "status"]]
    missing = await api.client.get("/v1/jobs/job_nothing")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


async def test_progress_reaches_the_job_while_it_runs(api: Api) -> None:
    dataset = await api.iris()
    job = (await api.submit("p", forest(dataset, n_estimators=SLOW))).json()
    await _running(api, job["id"])
    seen: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        current = await api.job(job["id"])
        progress = current["progress"]
        seen.append((progress["done"], progress["total"], progress["stage"]))
        if current["status"] != "running" or (
            progress["stage"] == "fitting" and progress["done"] > 0
        ):
            break
        await asyncio.sleep(0.1)
    assert any(stage == "fitting" and 0 < done <= total == SLOW for done, total, stage in seen), (
        seen
    )
    await api.client.post(f"/v1/jobs/{job['id']}/cancel")
    await api.wait_job(job["id"])


async def test_cancel_running_job_ends_cancelled_without_a_version(api: Api) -> None:
    dataset = await api.iris()
    job = (await api.submit("c", forest(dataset, n_estimators=SLOW))).json()
    await _running(api, job["id"])
    asked = time.monotonic()
    response = await api.client.post(f"/v1/jobs/{job['id']}/cancel")
    assert response.status_code == 202
    assert response.json()["cancel_requested"] is True
    ended = await api.wait_job(job["id"], timeout=10)
    assert ended["status"] == "cancelled"
    assert time.monotonic() - asked < 5
    assert ended["error"] is None and ended["finished_at"]
    assert (await api.client.get("/v1/models/c")).status_code == 404
    again = await api.client.post(f"/v1/jobs/{job['id']}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "conflict"


async def test_cancel_queued_job_is_immediate(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_concurrent_jobs=1)):
        dataset = await api.iris()
        running = (await api.submit("q", forest(dataset, n_estimators=SLOW))).json()
        queued = (await api.submit("q", forest(dataset, n_estimators=3))).json()
        response = await api.client.post(f"/v1/jobs/{queued['id']}/cancel")
        assert response.status_code == 202
        assert response.json()["status"] == "cancelled"
        assert (await api.job(queued["id"]))["status"] == "cancelled"
        await api.client.post(f"/v1/jobs/{running['id']}/cancel")
        assert (await api.wait_job(running["id"]))["status"] == "cancelled"
        # Both reserved numbers stay used: the next version is 3.
        assert (await api.train("q", forest(dataset, n_estimators=3)))["version"] == 3


async def test_cancel_finished_job_409(api: Api) -> None:
    dataset = await api.iris()
    version = await api.train("f", forest(dataset, n_estimators=3))
    jobs = (await api.client.get("/v1/jobs", params={"model": "f"})).json()
    assert version["job_id"] == jobs[0]["id"]
    response = await api.client.post(f"/v1/jobs/{jobs[0]['id']}/cancel")
    assert response.status_code == 409
    missing = await api.client.post("/v1/jobs/job_none/cancel")
    assert missing.status_code == 404


async def test_killed_worker_fails_its_job_only(app: FastAPI, api: Api) -> None:
    dataset = await api.iris()
    job = (await api.submit("k", forest(dataset, n_estimators=SLOW))).json()
    await _running(api, job["id"])
    runner = app.state.services.runner
    for _ in range(100):  # the job is marked running just before its process starts
        if (pid := runner.worker_pid(job["id"])) is not None:
            break
        await asyncio.sleep(0.05)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    ended = await api.wait_job(job["id"], timeout=10)
    assert ended["status"] == "failed"
    assert ended["error"]["code"] == "worker_crashed"
    assert "SIGKILL" in ended["error"]["detail"]
    # The service and the next job are fine.
    assert (await api.client.get("/readyz")).status_code == 200
    assert (await api.train("k", forest(dataset, n_estimators=3)))["version"] == 2


async def test_job_over_the_timeout_is_failed(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(job_timeout_s=1.0)):
        dataset = await api.iris()
        job = (await api.submit("t", forest(dataset, n_estimators=5000))).json()
        ended = await api.wait_job(job["id"], timeout=20)
        assert ended["status"] == "failed"
        assert ended["error"]["code"] == "timeout"
        assert "ENSEMBLE_JOB_TIMEOUT_S" in ended["error"]["detail"]


async def test_wait_timeout_answers_202_with_the_job(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(wait_timeout_s=0.3)):
        dataset = await api.iris()
        response = await api.submit("w", forest(dataset, n_estimators=SLOW), wait=True)
        assert response.status_code == 202
        job = response.json()
        assert job["status"] in ("queued", "running")
        await api.client.post(f"/v1/jobs/{job['id']}/cancel")
        await api.wait_job(job["id"])


async def test_wait_on_a_cancelled_job_answers_its_problem(api: Api) -> None:
    dataset = await api.iris()

    async def cancel_when_running() -> None:
        while True:
            jobs = (await api.client.get("/v1/jobs", params={"status": "running"})).json()
            if jobs:
                await api.client.post(f"/v1/jobs/{jobs[0]['id']}/cancel")
                return
            await asyncio.sleep(0.05)

    canceller = asyncio.create_task(cancel_when_running())
    response = await api.submit("wc", forest(dataset, n_estimators=SLOW), wait=True)
    await canceller
    assert response.status_code == 409
    assert response.json()["code"] == "cancelled"


async def test_a_worker_exit_is_settled_without_waiting_for_a_tick(
    settings_for: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runner reads its worker's exit sentinel: with ticks 10 minutes apart, the job
    # is still settled (its worker gone from the runner) when ?wait=true answers; before,
    # the wait gave up on the settling after SETTLE_S and the worker stayed listed.
    monkeypatch.setattr(runner_module, "TICK_S", 600.0)
    async for app, api in started(settings_for()):
        dataset = await api.iris()
        version = await api.train("s", forest(dataset, n_estimators=3))
        runner = app.state.services.runner
        assert runner.worker_pid(version["job_id"]) is None
