"""Several server processes (ENSEMBLE_WORKERS): the setting, the service-wide job limits
(two apps on one data folder, as two processes run them) and the merged metrics.

The real thing, two uvicorn processes behind one port, is tests/e2e/test_workers.py.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI
from prometheus_client import values
from prometheus_client.parser import text_string_to_metric_families

from app.metrics import Metrics
from app.server.launcher import EXIT_SETTINGS, load_settings
from app.settings import MAX_WORKERS, Settings, available_cpus
from ensembles.registry import ModelCache
from tests.api.conftest import started
from tests.api.support import Api, forest

SLOW = 3000  # trees: several seconds on iris


# -------------------------------------------------------------------------- the setting


@pytest.mark.parametrize(("value", "expected"), [("1", 1), ("2", 2), (" 16 ", 16), ("64", 64)])
def test_workers_is_a_number_of_processes(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: int
) -> None:
    monkeypatch.setenv("ENSEMBLE_WORKERS", value)
    settings = Settings()
    assert settings.workers == expected and settings.worker_count == expected


def test_workers_defaults_to_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENSEMBLE_WORKERS", raising=False)
    assert Settings().worker_count == 1


@pytest.mark.parametrize("value", ["auto", "AUTO", " Auto "])
def test_workers_auto_is_one_per_available_cpu(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("ENSEMBLE_WORKERS", value)
    settings = Settings()
    assert settings.workers == "auto"
    assert settings.worker_count == min(available_cpus(), MAX_WORKERS)
    assert 1 <= settings.worker_count <= len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [("max 100000", 8), ("150000 100000", 2), ("50000 100000", 1), ("800000 100000", 8)],
)
def test_auto_follows_the_containers_cpu_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_max: str, expected: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(8)))
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    assert available_cpus(tmp_path) == expected
    assert available_cpus(tmp_path / "none") == 8  # no cgroup files: the affinity


@pytest.mark.parametrize("value", ["0", "-1", "65", "1.5", "two", "", "yes"])
def test_a_bad_workers_value_stops_the_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    monkeypatch.setenv("ENSEMBLE_WORKERS", value)
    with pytest.raises(SystemExit) as stopped:
        load_settings()
    assert stopped.value.code == EXIT_SETTINGS
    error = capsys.readouterr().err
    assert error == (
        "invalid setting ENSEMBLE_WORKERS: ENSEMBLE_WORKERS is the number of server "
        f"processes: a whole number from 1 to {MAX_WORKERS}, or auto (one per CPU this "
        "process may use)\n"
    )


def test_every_bad_setting_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ENSEMBLE_WORKERS", "0")
    monkeypatch.setenv("ENSEMBLE_MAX_QUEUED_JOBS", "-3")
    with pytest.raises(SystemExit):
        load_settings()
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "invalid setting ENSEMBLE_MAX_QUEUED_JOBS",
        "invalid setting ENSEMBLE_WORKERS",
    ]


# ------------------------------------------------- job limits of the whole service


def _runs(app: FastAPI, job_id: str) -> bool:
    return app.state.services.runner.worker_pid(job_id) is not None


async def _training(api: Api, job_id: str) -> None:
    """Until the job's worker reports progress (its process has started)."""
    for _ in range(600):
        job = await api.job(job_id)
        assert job["status"] in ("queued", "running"), job
        if job["progress"]["done"] > 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the job made no progress")


async def test_running_and_queue_limits_are_the_services_and_cancel_works_anywhere(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(max_concurrent_jobs=1, max_queued_jobs=1)
    async for app_a, a in started(settings):
        async for app_b, b in started(settings):
            dataset = await a.iris()
            slow = (await a.submit("slow", forest(dataset, n_estimators=SLOW))).json()
            await _training(a, slow["id"])
            # One job may run in the whole service: a job submitted to the other process
            # waits, and waits on (each runner looks for work every 0.5 s).
            waiting = asyncio.create_task(b.submit("next", forest(dataset, 3), wait=True))
            while not (await b.client.get("/v1/jobs", params={"status": "queued"})).json():
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.2)
            assert [j["id"] for j in (await b.client.get("/v1/jobs?status=running")).json()] == [
                slow["id"]
            ]
            # One may wait: a third is refused by either process.
            for api in (a, b):
                refused = await api.submit("more", forest(dataset, 3))
                assert refused.status_code == 429, refused.text
                problem = refused.json()
                assert problem["code"] == "queue_full"
                assert problem["detail"] == (
                    "1 jobs are waiting and 1 running; retry when some have finished"
                )
                assert "ENSEMBLE_MAX_QUEUED_JOBS" in problem["errors"][0]["msg"]
            # The cancel goes to the process that does not run the job.
            owner, other = (a, b) if _runs(app_a, slow["id"]) else (b, a)
            assert _runs(app_a, slow["id"]) != _runs(app_b, slow["id"])
            cancel = await other.client.post(f"/v1/jobs/{slow['id']}/cancel")
            assert cancel.status_code == 202 and cancel.json()["cancel_requested"]
            assert (await owner.wait_job(slow["id"], timeout=10))["status"] == "cancelled"
            # The slot is free: the queued job runs, and its ?wait=true answers 201.
            answered = await asyncio.wait_for(waiting, 30)
            assert answered.status_code == 201, answered.text
            assert answered.json()["model"] == "next"


async def test_the_oldest_queued_job_starts_first_whichever_process_took_it(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for(max_concurrent_jobs=1)
    async for _, a in started(settings):
        async for _, b in started(settings):
            dataset = await a.iris()
            slow = (await a.submit("slow", forest(dataset, n_estimators=SLOW))).json()
            await a.wait_job(slow["id"], timeout=30, until=("running",))
            older = (await b.submit("older", forest(dataset, 3))).json()
            newer = (await a.submit("newer", forest(dataset, 3))).json()
            await a.client.post(f"/v1/jobs/{slow['id']}/cancel")
            ended = [await a.wait_job(job["id"], timeout=30) for job in (older, newer)]
            assert [job["status"] for job in ended] == ["succeeded", "succeeded"]
            assert ended[0]["started_at"] <= ended[1]["started_at"]
            assert ended[0]["finished_at"] <= ended[1]["started_at"]  # one at a time


# ------------------------------------------------------------------ merged metrics


def _sample(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def test_shared_metrics_add_up_the_processes_and_forget_the_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes' metrics in one folder: this one, and one that has died (a pid no
    process can have). Values are kept per process, as prometheus-client's multiprocess
    mode does, by giving each Metrics the value class of 'its' process."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1

    def in_process(pid: int) -> Metrics:
        monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue(lambda: pid))
        return Metrics(tmp_path)

    gone, here = in_process(dead), in_process(os.getpid())
    for metrics, size in ((gone, 100), (here, 300)):
        metrics.observe_request("GET", "/healthz", 200, 0.01)
        metrics.observe_prediction("m", 3, 1, "")
        metrics.observe_training("succeeded", 2.0)
        metrics.in_progress.inc()
        observer = metrics.cache_observer()
        assert observer is not None
        ModelCache(4, 1000, observer).get_or_load(("m", 1, "s"), object, size)
    here.watch(lambda: {"queued": 1, "running": 2}, ModelCache(1, 1))
    text = here.exposition(None)[0].decode()

    route = {"method": "GET", "route": "/healthz", "status": "200"}
    assert _sample(text, "ensemble_http_requests_total", **route) == 2
    assert _sample(text, "ensemble_http_request_duration_seconds_count", **route) == 2
    assert _sample(text, "ensemble_predictions_total", model="m", version="1", alias="") == 2
    assert _sample(text, "ensemble_prediction_rows_total", model="m") == 6
    assert _sample(text, "ensemble_training_duration_seconds_count", status="succeeded") == 2
    assert _sample(text, "ensemble_model_cache_misses_total") == 2
    assert _sample(text, "ensemble_model_cache_loads_total") == 2
    # The dead process's requests in progress and cache no longer count; this one's do.
    assert _sample(text, "ensemble_http_requests_in_progress") == 1
    assert _sample(text, "ensemble_model_cache_bytes") == 300
    assert _sample(text, "ensemble_model_cache_entries") == 1
    # From the database, once.
    assert _sample(text, "ensemble_training_jobs", status="running") == 2
    # Process figures of each live server process, by pid.
    assert _sample(text, "process_resident_memory_bytes", pid=str(os.getpid())) is not None
    assert f'pid="{dead}"' not in text
    here.close()
    assert not list(tmp_path.glob(f"gauge_live*_{os.getpid()}.db"))


async def test_one_process_keeps_its_own_metrics(api: Api) -> None:
    """Without a shared folder (one server process) nothing is labelled with a pid."""
    await api.client.get("/healthz")
    text = (await api.client.get("/metrics")).text
    assert "pid=" not in text and _sample(text, "process_open_fds") is not None
