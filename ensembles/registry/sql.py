"""The registry on a SQL database (SQLite by default) plus a store for its bytes.

This class decides transaction boundaries and the order of file and database steps; the
SQL lives in ``rows`` (reads), ``lifecycle`` (jobs) and ``versioning`` (versions and
aliases). Files are written before the row that refers to them and removed after that
row is gone, so a crash can leave an unreferenced file (removed at the next start) but
never a row pointing at a missing or partial file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ensembles.errors import (
    ConflictError,
    NotFoundError,
    Problem,
    SpecError,
    StorageError,
    TrainingCancelledError,
)
from ensembles.registry import database, lifecycle, rollout, rows, versioning
from ensembles.registry.base import ArtifactStore, Registry, StoredExport, StoredObject
from ensembles.registry.changes import ChangeCounter
from ensembles.registry.datasets import check_dataset_id, check_parquet, new_dataset_id
from ensembles.registry.instances import InstanceLock, folder_id, sweep_dead_locks
from ensembles.registry.lifecycle import INTERRUPTED_QUEUED, INTERRUPTED_RUNNING
from ensembles.registry.liveness import LEASE_S, Lease
from ensembles.registry.names import (
    LATEST,
    describe,
    is_alias,
    validate_alias,
    validate_model_name,
)
from ensembles.registry.records import (
    FINISHED,
    JOB_STATUSES,
    UNFINISHED,
    AliasRecord,
    DatasetRecord,
    JobRecord,
    ModelRecord,
    ShadowStatsRecord,
    VersionRecord,
    job_problem,
)
from ensembles.registry.schema import datasets, jobs, versions
from ensembles.registry.stores import StoreConfig, open_store
from ensembles.registry.stores.files import ensure_folder
from ensembles.routing import ShadowCounts

__all__ = ["INTERRUPTED_QUEUED", "INTERRUPTED_RUNNING", "SqlRegistry"]

log = logging.getLogger(__name__)

MAX_DATASET_NAME: Final = 256
_RESOLVED_MAX: Final = 1024  # version references kept resolved by resolve_version
T = TypeVar("T")


def _now() -> datetime:
    return datetime.now(UTC)


def _json_copy(value: T, what: str) -> T:
    """A deep copy through JSON: proves ``value`` can be stored on every backend."""
    try:
        copied: T = json.loads(database.dump_json(value))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not storable as JSON: {exc}") from exc
    return copied


def _reason(exc: BaseException) -> str:
    """A one-line reason for logs and readiness, without the SQL statement."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class SqlRegistry:
    """Datasets, jobs, versions and aliases in a SQL database; their bytes in ``store``.

    Thread-safe (one engine, a connection per call). Open one per process: a forked
    child gets fresh connections, but the jobs, the instance lock and its lease stay the
    parent's.
    """

    def __init__(
        self,
        *,
        data_dir: Path,
        engine: Engine,
        lock: InstanceLock,
        store: ArtifactStore,
        lease_s: float = LEASE_S,
    ) -> None:
        """Use :meth:`open`; this only wires already-prepared parts together."""
        self.data_dir = data_dir
        self.instance_id = lock.id
        self.store = store
        self._engine = engine
        self._lock = lock
        # Forced: the lease is also released while closing.
        self._lease = Lease(
            lock, folder_id(lock.folder), lambda step: self._run_write(step, force=True), lease_s
        )
        self._pid = self._opened_by = os.getpid()
        self._closed = False
        self._changes = ChangeCounter(engine.url)
        self._resolved: dict[tuple[str, str], tuple[int, VersionRecord]] = {}
        self._routes: dict[tuple[str, str], tuple[int, AliasRecord | None]] = {}

    # ------------------------------------------------------------------ life cycle

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
            raise StorageError(f"could not open the registry database: {_reason(exc)}") from exc
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
                lambda conn: lifecycle.interrupt(conn, {self.instance_id}, _now()), force=True
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
            result["database"] = _reason(exc.__cause__ or exc)
        try:
            self.store.probe()
            result["artifact_store"] = "ok"
        except OSError as exc:
            result["artifact_store"] = f"cannot write to {self.store.location}: {_reason(exc)}"
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

    def fail_dead_jobs(self) -> list[str]:
        """Fail the queued and running jobs of dead instances; returns their ids.

        Cheap (two queries, lock files probed): a service may call it every few seconds.
        """
        sweep_dead_locks(self._lock.folder)
        with self._read() as conn:
            query = sa.select(jobs.c.owner).where(jobs.c.status.in_(UNFINISHED)).distinct()
            owners: set[str | None] = set(conn.execute(query).scalars())
            census = self._lease.census(conn)
        dead = {owner for owner in owners if census.is_dead(owner)}
        failed: list[str] = []
        if dead:
            failed = self._run_write(lambda conn: lifecycle.interrupt(conn, dead, _now()))
            log.warning("failed %d job(s) of stopped instances: %s", len(failed), failed)
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

    # ------------------------------------------------------------------ transactions

    def _connect(self, *, force: bool = False) -> Connection:
        if self._closed and not force:
            raise StorageError("the registry is closed")
        if os.getpid() != self._pid:  # forked: never share the parent's connections
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        return self._engine.connect()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A connection for reads: its statements share one snapshot; never blocks (WAL)."""
        try:
            with self._connect() as conn:
                yield database.for_reading(conn)
        except sa.exc.SQLAlchemyError as exc:
            raise StorageError(f"registry database error: {_reason(exc)}") from exc

    @contextmanager
    def _write(self, *, force: bool = False) -> Iterator[Connection]:
        """A write transaction, committed on normal exit; takes the write lock up front."""
        try:
            with self._connect(force=force) as conn:
                conn.execution_options(**{database.WRITE_OPTION: True})
                with conn.begin():
                    yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise StorageError(f"registry database error: {_reason(exc)}") from exc

    def _run_write(self, step: Callable[[Connection], T], *, force: bool = False) -> T:
        with self._write(force=force) as conn:
            return step(conn)

    # ------------------------------------------------------------------ datasets

    def create_dataset(
        self, *, name: str | None, parquet: bytes, n_rows: int, columns: list[dict[str, object]]
    ) -> DatasetRecord:
        """Store canonical Parquet bytes immutably with their summary, under a new id."""
        if name is not None and len(name) > MAX_DATASET_NAME:
            raise SpecError(
                "dataset name too long", [Problem(("name",), f"at most {MAX_DATASET_NAME} chars")]
            )
        if n_rows < 0:
            raise ValueError("n_rows must be >= 0")
        check_parquet(parquet)
        summary = _json_copy(columns, "the column summary")
        dataset_id = new_dataset_id()
        try:
            written = self.store.write_dataset(dataset_id, parquet)
        except OSError as exc:
            raise StorageError(f"could not store the dataset: {_reason(exc)}") from exc
        record = DatasetRecord(
            id=dataset_id,
            name=name,
            n_rows=n_rows,
            n_columns=len(summary),
            sha256=written.sha256,
            size_bytes=written.size,
            columns=summary,
            created_at=_now(),
        )
        try:
            with self._write() as conn:
                conn.execute(sa.insert(datasets).values(**dataclasses.asdict(record)))
        except BaseException:
            self.store.remove_dataset(dataset_id)
            raise
        return record

    def get_dataset(self, dataset_id: str) -> DatasetRecord:
        check_dataset_id(dataset_id)
        with self._read() as conn:
            return rows.fetch_dataset(conn, dataset_id)

    def list_datasets(self) -> list[DatasetRecord]:
        """Every dataset, newest first."""
        query = sa.select(datasets).order_by(datasets.c.created_at.desc(), datasets.c.id)
        with self._read() as conn:
            return [rows.dataset_record(row) for row in conn.execute(query).mappings()]

    def datasets_named(self, name: str) -> list[DatasetRecord]:
        """The datasets uploaded under ``name``, newest first (none for an unnamed one)."""
        query = (
            sa.select(datasets)
            .where(datasets.c.name == name)
            .order_by(datasets.c.created_at.desc(), datasets.c.id)
        )
        with self._read() as conn:
            return [rows.dataset_record(row) for row in conn.execute(query).mappings()]

    def delete_dataset(self, dataset_id: str) -> None:
        """Forget a dataset; versions trained on it keep working (artifacts are standalone)."""
        check_dataset_id(dataset_id)
        with self._write() as conn:
            if conn.execute(sa.delete(datasets).where(datasets.c.id == dataset_id)).rowcount == 0:
                raise NotFoundError(f"dataset {dataset_id!r} not found")
        self.store.remove_dataset(dataset_id)

    def read_dataset_parquet(self, dataset_id: str) -> bytes:
        """The stored Parquet bytes, verified against the recorded sha256."""
        record = self.get_dataset(dataset_id)
        return self.store.read_dataset(dataset_id, record.sha256, record.size_bytes)

    # ------------------------------------------------------------------ jobs

    def submit_job(
        self, model: str, request: dict[str, object], *, max_open: int | None = None
    ) -> JobRecord:
        """Reserve the next version number of ``model`` and queue a job for it, atomically.

        ``max_open`` bounds the jobs queued or running in the whole registry (every
        process sharing it): QueueFullError, and nothing reserved, when that many are.
        """
        name = validate_model_name(model)
        stored = _json_copy(request, "the training request")
        return self._run_write(
            lambda conn: lifecycle.submit(conn, name, stored, self.instance_id, _now(), max_open)
        )

    def get_job(self, job_id: str) -> JobRecord:
        with self._read() as conn:
            return rows.fetch_job(conn, job_id)

    def list_jobs(
        self, status: str | None = None, model: str | None = None, limit: int | None = None
    ) -> list[JobRecord]:
        """Jobs, newest first, optionally filtered by status and model."""
        query = sa.select(jobs).order_by(jobs.c.created_at.desc(), jobs.c.version.desc())
        if status is not None:
            if status not in JOB_STATUSES:
                raise SpecError(
                    f"unknown job status {status!r}",
                    [Problem(("status",), f"must be one of {', '.join(JOB_STATUSES)}")],
                )
            query = query.where(jobs.c.status == status)
        if model is not None:
            query = query.where(jobs.c.model == validate_model_name(model))
        if limit is not None:
            query = query.limit(max(limit, 0))
        with self._read() as conn:
            return [rows.job_record(row) for row in conn.execute(query).mappings()]

    def count_jobs_by_status(self) -> dict[str, int]:
        """How many jobs are in each status (every status present, zero included).

        One ``GROUP BY`` over the status column: cheap enough for every metrics scrape.
        """
        counts = dict.fromkeys(JOB_STATUSES, 0)
        query = sa.select(jobs.c.status, sa.func.count()).group_by(jobs.c.status)
        with self._read() as conn:
            for status, n in conn.execute(query):
                counts[str(status)] = int(n)
        return counts

    def start_job(self, job_id: str) -> JobRecord:
        """queued -> running (ConflictError otherwise); this instance becomes its owner."""
        return self._run_write(lambda conn: lifecycle.start(conn, job_id, self.instance_id, _now()))

    def start_next_job(self, max_running: int) -> JobRecord | None:
        """Start the oldest queued job (whichever instance queued it) if fewer than
        ``max_running`` jobs run in the whole registry; this instance becomes its owner.

        None when there is nothing to start. A read answers that cheaply; the write
        transaction, which checks again, is only taken when a job may start.
        """
        with self._read() as conn:
            if not lifecycle.can_start_next(conn, max_running):
                return None
        return self._run_write(
            lambda conn: lifecycle.start_next(conn, self.instance_id, max_running, _now())
        )

    def fail_queued_jobs(self, problem: dict[str, object]) -> list[JobRecord]:
        """Fail the jobs this instance queued and nobody started (when it stops)."""
        stored = _json_copy(problem, "the job error")

        def fail(conn: Connection) -> list[JobRecord]:
            ids = lifecycle.fail_queued_of(conn, self.instance_id, stored, _now())
            return [rows.fetch_job(conn, job_id) for job_id in ids]

        return self._run_write(fail)

    def update_progress(self, job_id: str, done: int, total: int, stage: str) -> None:
        """Record a running job's progress (ignored once it has ended).

        Each call is a committed write: throttle them (a few per second at most).
        """
        if done < 0 or total < 0:
            raise ValueError("progress counts must be >= 0")
        progress: dict[str, object] = {"done": int(done), "total": int(total), "stage": stage}
        self._run_write(lambda conn: lifecycle.record_progress(conn, job_id, progress))

    def request_cancel(self, job_id: str) -> JobRecord:
        """Cancel a queued job now, or ask a running one to stop; ConflictError once ended."""
        return self._run_write(lambda conn: lifecycle.request_cancel(conn, job_id, _now()))

    def finish_job(
        self,
        job_id: str,
        status: Literal["failed", "cancelled"],
        error: dict[str, object] | None,
    ) -> JobRecord:
        """End an unfinished job without a version (ConflictError if it already ended).

        Not needed after :meth:`publish_version`, which always ends the job itself.
        """
        if status not in ("failed", "cancelled"):
            raise ValueError(f"a job can only be finished as failed or cancelled, not {status!r}")
        if error is None and status == "failed":
            error = job_problem("training_failed", "Training failed", "no reason was given")
        stored = None if error is None else _json_copy(error, "the job error")
        return self._run_write(lambda conn: lifecycle.finish(conn, job_id, status, stored, _now()))

    # ------------------------------------------------------------------ publishing

    def publish_version(
        self, job_id: str, model: object, metadata: dict[str, object]
    ) -> VersionRecord:
        """Store the fitted ``model`` as the job's reserved version and make it visible.

        The artifact is made durable first; then one transaction inserts the version and
        marks the job succeeded. This method always ends the job: succeeded; failed with
        a storage problem (raises StorageError; the file is removed, earlier versions are
        untouched); or cancelled when a cancel was requested meanwhile (raises
        TrainingCancelledError). A job that is not running raises ConflictError and is
        left as it is.
        """
        job = self.get_job(job_id)
        if job.status != "running":
            raise ConflictError(f"job {job_id} is {job.status}; only a running job can publish")
        if job.cancel_requested:
            self._run_write(lambda conn: lifecycle.cancel_if_unfinished(conn, job_id, _now()))
            raise TrainingCancelledError(f"job {job_id} was cancelled before it was published")
        name, number = validate_model_name(job.model), job.version
        what = describe(name, number)
        try:
            document = _json_copy(metadata, "the version metadata")
        except TypeError as exc:
            raise self._storage_failure(job_id, f"could not record {what}: {exc}") from exc
        try:
            written = self.store.write_artifact(name, number, model)
        except Exception as exc:
            detail = f"could not write the artifact of {what}: {_reason(exc)}"
            raise self._storage_failure(job_id, detail) from exc
        document["artifact"] = versioning.artifact_block(document.get("artifact"), written)
        try:
            outcome = self._run_write(
                lambda conn: self._make_visible(conn, name, job_id, written, document)
            )
        except BaseException as exc:
            self.store.remove_artifact(name, number)
            if isinstance(exc, StorageError):
                raise self._storage_failure(
                    job_id, f"could not record {what}: {exc.detail}"
                ) from exc
            raise
        if outcome != "succeeded":
            self.store.remove_artifact(name, number)
            if outcome == "cancelled":
                raise TrainingCancelledError(f"job {job_id} was cancelled before it was published")
            raise ConflictError(f"job {job_id} is {outcome}; the version was not published")
        with self._read() as conn:
            return rows.fetch_version(conn, name, number)

    @staticmethod
    def _make_visible(
        conn: Connection,
        name: str,
        job_id: str,
        written: StoredObject,
        document: dict[str, object],
    ) -> str:
        """The visibility transaction; returns how the job ended (or its status as found).

        Takes the model's lock first (as deleting the model does), then the job's.
        """
        now = _now()
        versioning.lock_model(conn, name)
        job = rows.fetch_job(conn, job_id, for_update=True)
        if job.status != "running":
            return job.status
        if job.cancel_requested:
            lifecycle.end(conn, job, "cancelled", now)
            return "cancelled"
        versioning.insert_version(conn, job, written, document, now)
        lifecycle.end(conn, job, "succeeded", now)
        return "succeeded"

    def _storage_failure(self, job_id: str, detail: str) -> StorageError:
        """Mark the job failed (best effort) and return the error to raise."""
        problem = job_problem("storage", "Storage unavailable", detail)
        try:
            self._run_write(
                lambda conn: lifecycle.fail_if_unfinished(conn, job_id, problem, _now())
            )
        except StorageError as exc:
            log.error("job %s could not be marked failed: %s", job_id, exc)
        return StorageError(detail)

    # ------------------------------------------------------------------ models and versions

    def list_models(self) -> list[ModelRecord]:
        """Models with at least one visible version, by name."""
        with self._read() as conn:
            return rows.model_records(conn)

    def get_model(self, name: str) -> ModelRecord:
        name = validate_model_name(name)
        with self._read() as conn:
            return rows.model_record(conn, name)

    def delete_model(self, name: str) -> None:
        """Remove every version, alias and artifact; the counter stays (numbers continue).

        Queued jobs of the model are cancelled and running ones asked to stop, so a
        deleted model does not reappear when an old job finishes.
        """
        name = validate_model_name(name)

        def delete(conn: Connection) -> list[int]:
            numbers = versioning.delete_model(conn, name)
            lifecycle.stop_jobs_of_deleted_model(conn, name, _now())
            return numbers

        for number in self._run_write(delete):
            self.store.remove_artifact(name, number)

    def list_versions(self, name: str) -> list[VersionRecord]:
        """Visible versions, newest first."""
        name = validate_model_name(name)
        with self._read() as conn:
            return rows.version_records(conn, name)

    def get_version(self, name: str, ref: str | int) -> VersionRecord:
        """The version ``ref`` names: an int, a digit string, ``latest`` or an alias."""
        name = validate_model_name(name)
        with self._read() as conn:  # autobegun: both queries read the same snapshot
            return rows.fetch_version(conn, name, rows.resolve_ref(conn, name, ref))

    def resolve_version(self, name: str, ref: str | int) -> VersionRecord:
        """:meth:`get_version`, answered from memory while the database is unchanged.

        For the prediction path: a reference resolved once is reused until anything is
        committed to the database, by any process (SQLite's ``data_version``, see
        :mod:`ensembles.registry.changes`); other databases are asked every time.
        """
        token = self._changes.value()
        key = (name, str(ref))
        hit = self._resolved.get(key) if token is not None else None
        if hit is not None and hit[0] == token:
            return hit[1]
        record = self.get_version(name, ref)  # the token was read first: never too new
        if token is not None:
            if len(self._resolved) >= _RESOLVED_MAX:
                self._resolved.clear()
            self._resolved[key] = (token, record)
        return record

    def resolved_version(self, name: str, ref: str | int) -> VersionRecord | None:
        """What :meth:`resolve_version` holds in memory for ``ref`` if still current, else
        None; never reads the database."""
        token = self._changes.value()
        hit = self._resolved.get((name, str(ref))) if token is not None else None
        return hit[1] if hit is not None and hit[0] == token else None

    def delete_version(self, name: str, version: int) -> None:
        """Delete a version and its artifact; ConflictError names the aliases on it."""
        name = validate_model_name(name)
        self._run_write(lambda conn: versioning.delete_version(conn, name, version))
        self.store.remove_artifact(name, version)

    def set_alias(
        self,
        name: str,
        alias: str,
        version: int | None = None,
        *,
        weights: dict[int, float] | None = None,
        shadow: int | None = None,
    ) -> ModelRecord:
        """Point ``alias`` at ``version``, or split it by ``weights`` (checked already:
        :func:`ensembles.routing.check_weights`), with an optional ``shadow``; one
        transaction, so readers see the old setting or the new one."""
        name, alias = validate_model_name(name), validate_alias(alias)

        def move(conn: Connection) -> ModelRecord:
            rollout.set_route(conn, name, alias, version, weights, shadow, _now())
            return rows.model_record(conn, name)

        return self._run_write(move)

    def get_alias(self, name: str, alias: str) -> AliasRecord:
        """An alias with its weights and shadow."""
        name, alias = validate_model_name(name), validate_alias(alias)
        with self._read() as conn:
            return rollout.fetch_alias(conn, name, alias)

    def list_aliases(self, name: str) -> list[AliasRecord]:
        name = validate_model_name(name)
        with self._read() as conn:
            return rollout.alias_records(conn, name)

    def resolve_alias(self, name: str, ref: str | int) -> AliasRecord | None:
        """The alias ``ref`` names, if it splits its traffic or has a shadow (None for
        numbers, ``latest`` and aliases on one version without one); answered from memory
        while the database is unchanged, like :meth:`resolve_version`."""
        if not isinstance(ref, str) or not is_alias(ref) or ref == LATEST:
            return None
        token = self._changes.value()
        key = (name, ref)
        hit = self._routes.get(key) if token is not None else None
        if hit is not None and hit[0] == token:
            return hit[1]
        name = validate_model_name(name)
        with self._read() as conn:
            found = rollout.alias_records(conn, name, ref)
        route = found[0] if found and (found[0].weights or found[0].shadow) else None
        if token is not None:
            if len(self._routes) >= _RESOLVED_MAX:
                self._routes.clear()
            self._routes[key] = (token, route)
        return route

    def resolved_alias(self, name: str, ref: str | int) -> tuple[bool, AliasRecord | None]:
        """(known, what :meth:`resolve_alias` holds for ``ref``) without I/O; known is
        False when the database must be asked."""
        if not isinstance(ref, str) or not is_alias(ref) or ref == LATEST:
            return True, None
        token = self._changes.value()
        hit = self._routes.get((name, ref)) if token is not None else None
        if hit is None or hit[0] != token:
            return False, None
        return True, hit[1]

    def shadow_stats(self, name: str, alias: str) -> ShadowStatsRecord:
        """The alias's shadow counts since it was set (NotFoundError without a shadow)."""
        name, alias = validate_model_name(name), validate_alias(alias)
        with self._read() as conn:
            return rollout.fetch_stats(conn, name, alias)

    def add_shadow_counts(self, name: str, alias: str, epoch: str, counts: ShadowCounts) -> bool:
        """Add one process's batch of shadow counts; False if that shadow is gone."""
        return self._run_write(lambda conn: rollout.add_counts(conn, name, alias, epoch, counts))

    def delete_alias(self, name: str, alias: str) -> None:
        name, alias = validate_model_name(name), validate_alias(alias)
        self._run_write(lambda conn: versioning.delete_alias(conn, name, alias))

    # ------------------------------------------------------------------ artifacts

    def read_artifact(self, name: str, version: int) -> bytes:
        """A visible version's artifact bytes, verified against the recorded sha256."""
        record = self._visible(name, version)
        try:
            return self.store.read_artifact(
                name, version, record.artifact_sha256, record.artifact_size
            )
        except Exception:
            self._visible(name, version)  # deleted meanwhile: NotFoundError, not damage
            raise

    def load_model(self, name: str, version: int) -> object:
        """Unpickle a version's model, only after its bytes matched the recorded sha256."""
        record = self._visible(name, version)
        try:
            return self.store.load_artifact(
                name, version, record.artifact_sha256, record.artifact_size
            )
        except Exception:
            self._visible(name, version)  # deleted meanwhile: NotFoundError, not damage
            raise

    def read_export(self, name: str, version: int, fmt: str) -> StoredExport | None:
        """A visible version's export kept beside its artifact, verified, or None."""
        self._visible(name, version)
        try:
            return self.store.read_export(name, version, fmt)
        except Exception:
            self._visible(name, version)  # deleted meanwhile: NotFoundError, not damage
            raise

    def write_export(
        self, name: str, version: int, fmt: str, data: bytes, info: Mapping[str, str]
    ) -> StoredExport:
        """Keep an export of a visible version and return the one every reader is served
        (ours, or a twin's computed at the same time by another replica)."""
        self._visible(name, version)
        written = self.store.write_export(name, version, fmt, data, info)
        try:
            self._visible(name, version)
        except NotFoundError:  # deleted while we wrote: remove what may have outlived it
            self.store.remove_artifact(name, version)
            raise
        kept = self.store.read_export(name, version, fmt)
        return kept if kept is not None else StoredExport(data, written.sha256, dict(info))

    def _visible(self, name: str, version: int) -> VersionRecord:
        name = validate_model_name(name)
        with self._read() as conn:
            return rows.fetch_version(conn, name, version)


if TYPE_CHECKING:

    def _implements_the_protocol(registry: SqlRegistry) -> Registry:
        return registry  # mypy proves SqlRegistry structurally satisfies Registry
