"""A new registry object on the same folder sees everything; dead instances are cleaned up."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from ensembles.registry import SqlRegistry
from ensembles.registry.sql import INTERRUPTED_QUEUED, INTERRUPTED_RUNNING
from ensembles.registry.stores.files import temp_path

from .support import COLUMNS, parquet_bytes, publish


def test_restart_sees_every_dataset_version_alias_and_job(
    data_dir: Path, database_url: str | None
) -> None:
    with SqlRegistry.open(data_dir, database_url) as first:
        dataset = first.create_dataset(name="d", parquet=parquet_bytes(), n_rows=3, columns=COLUMNS)
        v1 = publish(first, "iris", value={"v": 1})
        v2 = publish(first, "iris", value={"v": 2})
        publish(first, "other")
        first.set_alias("iris", "production", 1)
        first.set_alias("iris", "staging", 2)
        failed = first.submit_job("iris", {"n": 3})
        first.finish_job(failed.id, "failed", {"code": "training_failed", "detail": "bad"})
        running = first.submit_job("iris", {"n": 4})
        first.start_job(running.id)
        queued = first.submit_job("iris", {"n": 5})
        before_jobs = {job.id: job for job in first.list_jobs()}
        before_models = first.list_models()

    with SqlRegistry.open(data_dir, database_url) as second:
        assert second.list_datasets() == [dataset]
        assert second.read_dataset_parquet(dataset.id) == parquet_bytes()
        assert second.list_models() == before_models
        assert second.get_model("iris").aliases == {"production": 1, "staging": 2}
        assert second.get_version("iris", "production") == replace(v1, aliases=["production"])
        assert second.get_version("iris", "staging").metadata == v2.metadata
        assert second.load_model("iris", 2) == {"v": 2}
        after = {job.id: job for job in second.list_jobs()}
        assert after.keys() == before_jobs.keys()
        assert after[failed.id] == before_jobs[failed.id]
        assert after[running.id].status == "failed"
        assert after[running.id].error == {
            "code": "interrupted",
            "title": "Training interrupted",
            "detail": INTERRUPTED_RUNNING,
        }
        assert after[queued.id].status == "failed"
        assert (after[queued.id].error or {}).get("detail") == INTERRUPTED_QUEUED
        assert second.submit_job("iris", {}).version == 6  # 3, 4, 5 stay used


def test_a_live_instance_keeps_its_jobs_when_another_opens(
    data_dir: Path, database_url: str | None
) -> None:
    live = SqlRegistry.open(data_dir, database_url)
    job = live.submit_job("iris", {})
    live.start_job(job.id)
    with SqlRegistry.open(data_dir, database_url) as other:
        assert other.get_job(job.id).status == "running"
        assert other.recover() == []
        version = live.publish_version(job.id, {"ok": True}, {})
        assert other.get_version("iris", "latest") == version
        queued = live.submit_job("iris", {})
        live.close()  # a stopped service: its unfinished jobs end as failed
        assert other.get_job(queued.id).status == "failed"


def test_an_instance_that_vanished_without_closing_is_recovered(
    data_dir: Path, database_url: str | None
) -> None:
    ghost = SqlRegistry.open(data_dir, database_url)
    job = ghost.submit_job("iris", {})
    ghost.start_job(job.id)
    ghost._lock.release()  # what the kernel does when the process dies
    with SqlRegistry.open(data_dir, database_url) as survivor:
        assert survivor.get_job(job.id).status == "failed"
        assert list((data_dir / "locks").glob("*.lock")) == [survivor._lock.path]
    ghost._engine.dispose()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_leaves_the_parents_jobs_and_lock_alone(registry: SqlRegistry) -> None:
    job = registry.submit_job("iris", {})
    registry.start_job(job.id)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            if registry.get_job(job.id).status == "running" and registry.recover() == []:
                registry.close()
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert registry.get_job(job.id).status == "running"
    assert registry._lock.path.exists()
    assert publish(registry, "other").version == 1


def test_only_dead_instances_lose_their_temporary_files(
    data_dir: Path, database_url: str | None
) -> None:
    live = SqlRegistry.open(data_dir, database_url)
    ghost = SqlRegistry.open(data_dir, database_url)
    folder = live.store.artifacts.folder("iris")
    folder.mkdir()
    mine = temp_path(folder, live.instance_id)
    theirs = temp_path(data_dir / "datasets", ghost.instance_id)
    foreign = folder / ".not-ours.tmp"
    for path in (mine, theirs, foreign):
        path.write_bytes(b"partial")
    ghost.close()
    with SqlRegistry.open(data_dir, database_url):
        assert mine.exists() and foreign.exists()
        assert not theirs.exists()
    live.close()
