"""The jobs table as the queue of a service with several processes (registry instances):
the bound on open jobs at submit, the bound on running jobs at start, oldest first."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ensembles.errors import QueueFullError
from ensembles.registry import SqlRegistry, job_problem


@pytest.fixture
def other(data_dir: Path, database_url: str | None, registry: SqlRegistry) -> Iterator[SqlRegistry]:
    """A second instance on the same folder, as another server process would open it."""
    opened = SqlRegistry.open(data_dir, database_url)
    yield opened
    opened.close()


def test_submit_refuses_beyond_max_open_counting_every_instance(
    registry: SqlRegistry, other: SqlRegistry
) -> None:
    first = registry.submit_job("m", {}, max_open=3)
    registry.start_job(first.id)
    other.submit_job("m", {}, max_open=3)
    registry.submit_job("m", {}, max_open=3)
    with pytest.raises(QueueFullError, match="2 jobs are waiting and 1 running"):
        other.submit_job("m", {}, max_open=3)
    # Nothing was reserved by the refused submit; ended jobs free their place.
    registry.finish_job(first.id, "failed", None)
    assert other.submit_job("m", {}, max_open=3).version == 4
    assert registry.submit_job("m", {}).version == 5  # no bound given: no check


def test_start_next_starts_the_oldest_queued_job_whoever_queued_it(
    registry: SqlRegistry, other: SqlRegistry
) -> None:
    assert registry.start_next_job(1) is None  # nothing queued
    older = other.submit_job("m", {})
    newer = registry.submit_job("m", {})
    started = registry.start_next_job(1)
    assert started is not None and started.id == older.id and started.status == "running"
    assert other.start_next_job(1) is None  # the bound is the registry's, not the instance's
    assert registry.get_job(newer.id).status == "queued"
    assert other.start_next_job(2) is not None
    assert other.get_job(newer.id).status == "running"


def test_concurrent_starts_never_exceed_the_bound(
    data_dir: Path, database_url: str | None, registry: SqlRegistry
) -> None:
    submitted = [registry.submit_job("m", {}).id for _ in range(12)]
    instances = [SqlRegistry.open(data_dir, database_url) for _ in range(4)]
    started: list[str] = []
    go = threading.Event()

    def claim(instance: SqlRegistry) -> None:
        go.wait()
        for _ in range(10):
            job = instance.start_next_job(3)
            if job is not None:
                started.append(job.id)
            time.sleep(0.001)

    threads = [threading.Thread(target=claim, args=(i,)) for i in instances]
    try:
        for thread in threads:
            thread.start()
        go.set()
        for thread in threads:
            thread.join(60)
    finally:
        for instance in instances:
            instance.close()  # fails what it started: 3 jobs, as the service does
    assert len(started) == 3 and len(set(started)) == 3
    assert set(started) == set(submitted[:3])  # the oldest
    assert len(registry.list_jobs("queued")) == 9


def test_fail_queued_jobs_fails_this_instances_queued_jobs_only(
    registry: SqlRegistry, other: SqlRegistry
) -> None:
    mine = registry.submit_job("m", {})
    started = registry.submit_job("m", {})
    registry.start_job(started.id)
    theirs = other.submit_job("m", {})
    problem = job_problem("interrupted", "Training interrupted", "stopped")
    failed = registry.fail_queued_jobs(problem)
    assert [(job.id, job.status, job.error) for job in failed] == [(mine.id, "failed", problem)]
    assert registry.get_job(started.id).status == "running"
    assert registry.get_job(theirs.id).status == "queued"
    assert registry.fail_queued_jobs(problem) == []
