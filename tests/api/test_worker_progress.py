"""What a training worker records of a job's progress, and where it records it: a stage's
last count is never dropped by the write throttle (the job would read 208/300 until the
next stage), and training never waits for the registry: progress is written and the
cancel flag read on a thread of their own (:mod:`ensembles.job_updates`), not between
two boosting rounds while the library's threads wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from app.services.training import prepare_job
from app.threads import in_thread
from ensembles import jobs
from ensembles import training as training_module
from ensembles.job_updates import JobUpdates
from ensembles.parallel import MemberPool
from ensembles.registry import SqlRegistry
from tests.api.support import Api, forest

WAIT_S = 20.0  # only reached when the test fails


def _until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_stages_last_count_is_recorded(tmp_path: Path) -> None:
    registry = SqlRegistry.open(tmp_path / "data", None)
    try:
        job = registry.start_job(registry.submit_job("m", {}).id)

        def progress() -> object:
            return registry.get_job(job.id).progress

        with JobUpdates(registry, job.id, lambda: False) as updates:
            updates.progress(1, 300, "fitting")
            updates.progress(208, 300, "fitting")  # within the write interval: may be dropped
            updates.progress(300, 300, "fitting")  # the stage's last count: written all the same
            assert _until(lambda: progress() == {"done": 300, "total": 300, "stage": "fitting"})
            updates.progress(0, 1, "evaluating")
            assert _until(lambda: progress() == {"done": 0, "total": 1, "stage": "evaluating"})
            updates.progress(0, 1, "compiling")
        # Leaving writes what was noted last, whatever the thread had done.
        assert progress() == {"done": 0, "total": 1, "stage": "compiling"}
    finally:
        registry.close()


def test_a_cancel_is_read_by_the_thread(tmp_path: Path) -> None:
    registry = SqlRegistry.open(tmp_path / "data", None)
    try:
        job = registry.start_job(registry.submit_job("m", {}).id)
        with JobUpdates(registry, job.id, lambda: False) as updates:
            assert not updates.is_set()
            registry.request_cancel(job.id)
            assert _until(updates.is_set)
    finally:
        registry.close()


def test_stopped_is_seen_at_once(tmp_path: Path) -> None:
    registry = SqlRegistry.open(tmp_path / "data", None)
    try:
        job = registry.start_job(registry.submit_job("m", {}).id)
        stopped = threading.Event()
        with JobUpdates(registry, job.id, stopped.is_set) as updates:
            assert not updates.is_set()
            stopped.set()
            assert updates.is_set()
    finally:
        registry.close()


async def test_training_never_waits_for_the_registry(
    api: Api, app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No progress write and no read of the cancel flag is made by the thread that
    trains while it trains (on the old code each callback made them itself), and the
    job still records its progress and succeeds."""
    services = app.state.services
    registry = services.registry
    dataset = await api.iris()
    document = await prepare_job(registry, services.settings, "quiet", forest(dataset))
    job = await in_thread(registry.submit_job, "quiet", document.to_json())
    await in_thread(registry.start_job, job.id)
    training: set[int] = set()  # the thread inside train(), while it is inside
    calls: list[tuple[str, bool]] = []  # (method, made by the thread inside train())

    def recorded(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, threading.get_ident() in training))
            return original(*args, **kwargs)

        return call

    def train(*args: Any, **kwargs: Any) -> Any:
        training.add(threading.get_ident())
        try:
            return original_train(*args, **kwargs)
        finally:
            training.clear()

    original_train = training_module.train
    monkeypatch.setattr("ensembles.jobs.train", train)
    for name in ("update_progress", "get_job"):
        monkeypatch.setattr(registry, name, recorded(name, getattr(registry, name)))
    await in_thread(jobs.run_training, registry, job.id, MemberPool.local(1), lambda: False)
    assert (await api.job(job.id))["status"] == "succeeded"
    assert ("update_progress", False) in calls  # recorded all the same, by another thread
    made_by_training = sorted({name for name, inside in calls if inside})
    assert made_by_training == [], "training waited for the registry"
