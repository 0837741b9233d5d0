"""Replicas: registry instances with their own data folders on one database and bucket.

They cannot see each other's lock files, so they judge each other by leases in the
database: a live replica's running job is never failed by another one opening or
recovering, and its uploaded-but-unpublished artifact is never swept; a replica that
stopped renewing its lease (or was SIGKILLed) loses its jobs and files once it ran out.
Each test runs on a shared SQLite file outside both folders and on PostgreSQL.
"""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from ensembles.registry import SqlRegistry
from ensembles.registry.schema import instances
from ensembles.registry.sql import INTERRUPTED_RUNNING
from ensembles.registry.stores import StoreConfig
from ensembles.registry.stores.location import open_store

from .support import spawn_child

LONG_LEASE_S = 120.0  # never runs out during a test: only an explicit expiry ends it


@pytest.fixture
def shared_url(tmp_path: Path, database_url: str | None) -> str:
    """The database both replicas use: PostgreSQL, or a SQLite file in neither folder."""
    if database_url is not None:
        return database_url
    (tmp_path / "shared").mkdir()
    return f"sqlite+pysqlite:///{tmp_path / 'shared' / 'registry.db'}"


def _open(folder: Path, url: str, store: StoreConfig, lease_s: float = LONG_LEASE_S) -> SqlRegistry:
    return SqlRegistry.open(folder, url, store, lease_s=lease_s)


def _leases(registry: SqlRegistry) -> dict[str, datetime]:
    with registry._read() as conn:
        query = sa.select(instances.c.id, instances.c.expires_at)
        return {str(i): e for i, e in conn.execute(query)}


def _expire(registry: SqlRegistry, instance_id: str) -> None:
    """What the clock does to a lease nobody renews any more."""
    past = datetime.now(UTC) - timedelta(hours=1)
    with registry._write() as conn:
        conn.execute(
            sa.update(instances).where(instances.c.id == instance_id).values(expires_at=past)
        )


def test_replicas_in_other_folders_keep_each_others_running_jobs_and_uploads(
    tmp_path: Path, shared_url: str, s3_store: StoreConfig
) -> None:
    a = _open(tmp_path / "a", shared_url, s3_store)
    running = a.submit_job("iris", {"n": 1})
    a.start_job(running.id)
    queued = a.submit_job("iris", {"n": 2})
    # Uploaded, not yet recorded: what a job between its upload and its commit has made.
    a.store.write_artifact("iris", running.version, {"weights": [1.0]})
    try:
        with _open(tmp_path / "b", shared_url, s3_store) as b:  # its start-up recovery
            assert b.get_job(running.id).status == "running"
            assert b.get_job(queued.id).status == "queued"
            assert b.recover() == [] and b.fail_dead_jobs() == []
            assert ("iris", running.version) in set(b.store.stored_artifacts())
            assert set(_leases(b)) == {a.instance_id, b.instance_id}
            assert not (tmp_path / "b" / "locks" / f"{a.instance_id}.lock").exists()

            version = a.publish_version(running.id, {"weights": [1.0]}, {"task": "x"})
            assert b.get_version("iris", "latest") == version
            assert b.load_model("iris", version.version) == {"weights": [1.0]}
            assert b.get_job(running.id).status == "succeeded"
            a.close()  # a clean stop: its queued job fails, its lease is gone at once
            assert b.get_job(queued.id).status == "failed"
            assert set(_leases(b)) == {b.instance_id}
        with _open(tmp_path / "c", shared_url, s3_store) as c:
            assert c.load_model("iris", version.version) == {"weights": [1.0]}
    finally:
        a.close()


def test_a_replica_whose_lease_ran_out_loses_its_jobs_and_uploads(
    tmp_path: Path, shared_url: str, s3_store: StoreConfig
) -> None:
    a = _open(tmp_path / "a", shared_url, s3_store)
    job = a.submit_job("iris", {})
    a.start_job(job.id)
    a.store.write_artifact("iris", job.version, {"weights": [1.0]})
    a._lease.stop(remove=False)  # it hangs: no more renewals, its row stays
    try:
        with _open(tmp_path / "b", shared_url, s3_store) as b:
            assert b.fail_dead_jobs() == []  # the lease still runs
            _expire(b, a.instance_id)
            assert b.fail_dead_jobs() == [job.id]
            failed = b.get_job(job.id)
            assert failed.status == "failed" and failed.error is not None
            assert failed.error["detail"] == INTERRUPTED_RUNNING
            b.recover()
            assert ("iris", job.version) not in set(b.store.stored_artifacts())
            assert set(_leases(b)) == {b.instance_id}  # the dead one's row is forgotten
    finally:
        a._engine.dispose()
        a._lock.release()


def test_a_replica_forgotten_while_paused_registers_again(
    tmp_path: Path, shared_url: str, s3_store: StoreConfig
) -> None:
    a = _open(tmp_path / "a", shared_url, s3_store, lease_s=0.5)
    with a, _open(tmp_path / "b", shared_url, s3_store) as b:
        with b._write() as conn:
            conn.execute(sa.delete(instances).where(instances.c.id == a.instance_id))
        deadline = time.monotonic() + 30
        while a.instance_id not in _leases(b) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert a.instance_id in _leases(b)


def test_a_replica_killed_in_another_folder_is_recovered_once_its_lease_ran_out(
    tmp_path: Path, shared_url: str, s3_store: StoreConfig
) -> None:
    url, endpoint = str(s3_store.url), str(s3_store.endpoint_url)
    child = spawn_child(
        "replica", str(tmp_path / "a"), url, endpoint, "1.0", database_url=shared_url
    )
    try:
        assert child.stdout is not None
        _, job_id, version = child.stdout.readline().split()
        assert child.stdout.readline().strip() == "at-point"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    # The upload is looked for with the store alone: opening a registry already recovers
    # what a lease that ran out left, and on a loaded host the child's 1 s lease may have.
    uploads = open_store(s3_store, tmp_path / "look", owner="test").stored_artifacts()
    assert ("replicated", int(version)) in set(uploads)
    with _open(tmp_path / "b", shared_url, s3_store) as b:
        deadline = time.monotonic() + 60
        while b.get_job(job_id).status == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
            b.fail_dead_jobs()
        assert b.get_job(job_id).status == "failed"
        b.recover()
        assert ("replicated", int(version)) not in set(b.store.stored_artifacts())
        assert set(_leases(b)) == {b.instance_id}
