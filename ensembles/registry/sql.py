"""The registry on a SQL database (SQLite by default) plus a store for its bytes.

This class opens, checks, recovers and closes; each role lives in its own part
(``sql_datasets``, ``sql_jobs``, ``sql_versions``, ``sql_aliases``, over the shared
``transactions``), and the SQL itself in ``rows`` (reads), ``lifecycle`` (jobs) and
``versioning`` (versions and aliases). Files are written before the row that refers to
them and removed after that row is gone, so a crash can leave an unreferenced file
(removed at the next start) but never a row pointing at a missing or partial file.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ensembles.errors import StorageError
from ensembles.registry import database, lifecycle
from ensembles.registry.base import Registry
from ensembles.registry.instances import InstanceLock
from ensembles.registry.lifecycle import INTERRUPTED_QUEUED, INTERRUPTED_RUNNING
from ensembles.registry.liveness import LEASE_S
from ensembles.registry.names import describe
from ensembles.registry.records import FINISHED
from ensembles.registry.schema import datasets, jobs, versions
from ensembles.registry.sql_aliases import SqlAliases
from ensembles.registry.sql_datasets import SqlDatasets
from ensembles.registry.sql_jobs import SqlJobs
from ensembles.registry.sql_versions import SqlVersions
from ensembles.registry.stores import StoreConfig, open_store
from ensembles.registry.stores.files import ensure_folder
from ensembles.registry.transactions import short_reason, utc_now

__all__ = ["INTERRUPTED_QUEUED", "INTERRUPTED_RUNNING", "SqlRegistry"]

log = logging.getLogger(__name__)


class SqlRegistry(SqlDatasets, SqlJobs, SqlVersions, SqlAliases):
    """Datasets, jobs, versions and aliases in a SQL database; their bytes in ``store``.

    Thread-safe (one engine, a connection per call). Open one per process: a forked
    child gets fresh connections, but the jobs, the instance lock and its lease stay the
    parent's.
    """

    @classmethod
    def open(
        cls,
        data_dir: Path | str,
        database_url: str | None = None,
        store: StoreConfig | None = None,
        *,
        lease_s: float = LEASE_S,
    ) -> SqlRegistry:
        """Open (creating if needed) the registry in ``data_dir`` and make it consistent.

        Creates the folders, migrates the schema to head, takes this instance's lease
        (renewed every ``lease_s / 5`` seconds; other processes on the database count it
        alive until ``lease_s`` after its last renewal), then fails the jobs that dead
        instances left queued or running and removes their temporary and orphaned files.
        The bytes go where ``store`` says (default: a :class:`LocalStore` in ``data_dir``;
        an object store's bucket is checked first: StorageError if it cannot be used).
        """
        root = Path(data_dir)
        for folder in (root, root / "locks"):
            ensure_folder(folder)
        lock = InstanceLock(root / "locks")
        try:
            engine = database.create_engine(database.database_url(root, database_url))
            try:
                database.upgrade(engine)
                opened = open_store(store or StoreConfig(), root, lock.id)
                registry = cls(
                    data_dir=root, engine=engine, lock=lock, store=opened, lease_s=lease_s
                )
                registry._lease.take()
                registry._lease.start()
                try:
                    registry.recover()
                except BaseException:
                    with contextlib.suppress(StorageError):
                        registry._lease.stop(remove=True)
                    raise
            except BaseException:
                engine.dispose()
                raise
        except sa.exc.SQLAlchemyError as exc:
            lock.release()
            raise StorageError(
                f"could not open the registry database: {short_reason(exc)}"
            ) from exc
        except BaseException:
            lock.release()
            raise
        return registry

    def close(self) -> None:
        """Fail this instance's unfinished jobs; release its lease, connections and lock."""
        if self._closed:
            return
        self._closed = True
        self._changes.close()
        if os.getpid() != self._opened_by:  # a forked child: the jobs are the parent's
            self._engine.dispose(close=False)
            return
        try:
            self._run_write(
                lambda conn: lifecycle.interrupt(conn, {self.instance_id}, utc_now()), force=True
            )
        except StorageError as exc:
            log.warning("could not mark this instance's jobs as interrupted: %s", exc)
        try:
            self._lease.stop(remove=True)
        except StorageError as exc:  # it will run out on its own
            log.warning("could not release this instance's lease: %s", exc)
        finally:
            self._engine.dispose()
            self._lock.release()

    def __enter__(self) -> SqlRegistry:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def check(self) -> dict[str, str]:
        """Readiness: ``"ok"`` or a short reason for the database and the artifact store."""
        result: dict[str, str] = {}
        try:
            with self._read() as conn:
                conn.execute(sa.select(1)).scalar_one()
            result["database"] = "ok"
        except Exception as exc:
            result["database"] = short_reason(exc.__cause__ or exc)
        try:
            self.store.probe()
            result["artifact_store"] = "ok"
        except OSError as exc:
            result["artifact_store"] = f"cannot write to {self.store.location}: {short_reason(exc)}"
        return result

    def recover(self) -> list[str]:
        """Clean up after dead instances; returns the ids of the jobs it failed.

        Runs at :meth:`open`; a service whose database is shared by several processes may
        also call it periodically, as one of them can die while the others live on (an
        instance in another data folder counts as dead once its lease has run out).
        """
        failed = self.fail_dead_jobs()
        with self._read() as conn:
            census = self._lease.census(conn)
        self.store.sweep(census.is_dead)
        self._remove_orphan_artifacts()
        self._remove_orphan_datasets()
        self._run_write(census.forget_dead)
        return failed

    def _remove_orphan_artifacts(self) -> None:
        """Remove files of versions that no row refers to and no live job will publish.

        Such a file exists when a process died between renaming an artifact into place
        and committing its version, or between deleting a version and its file. The
        listing comes first, so a file that appears afterwards is not considered; a job
        that has ended can no longer publish, so its file is safe to remove.
        """
        on_disk = list(self.store.stored_artifacts())
        if not on_disk:
            return
        with self._read() as conn:
            visible = {
                (str(m), int(v))
                for m, v in conn.execute(sa.select(versions.c.model, versions.c.version))
            }
            ended = sa.select(jobs.c.model, jobs.c.version).where(jobs.c.status.in_(FINISHED))
            finished = {(str(m), int(v)) for m, v in conn.execute(ended)}
        for model, number in on_disk:
            if (model, number) in finished and (model, number) not in visible:
                log.info("removing the orphaned artifact of %s", describe(model, number))
                self.store.remove_artifact(model, number)

    def _remove_orphan_datasets(self) -> None:
        """Remove dataset bytes no row refers to (a crash between upload and insert).

        The store lists only bytes older than its grace period, and the listing comes
        before the query: an upload whose row is still to be committed is never removed.
        """
        stored = sorted(set(self.store.stored_datasets()))
        known: set[str] = set()
        with self._read() as conn:
            for start in range(0, len(stored), 500):  # within every database's bind limit
                chunk = stored[start : start + 500]
                query = sa.select(datasets.c.id).where(datasets.c.id.in_(chunk))
                known.update(str(dataset_id) for dataset_id in conn.execute(query).scalars())
        for dataset_id in sorted(set(stored) - known):
            log.info("removing the orphaned bytes of dataset %s", dataset_id)
            self.store.remove_dataset(dataset_id)


if TYPE_CHECKING:

    def _implements_the_protocol(registry: SqlRegistry) -> Registry:
        return registry  # mypy proves SqlRegistry structurally satisfies Registry
