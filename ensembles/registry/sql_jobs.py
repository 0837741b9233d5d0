"""Training jobs on SQL: submission, scheduling, progress, cancellation, publishing.

A version is published in two steps: the artifact is made durable first, then one
transaction inserts the version and ends the job.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ensembles.errors import ConflictError, Problem, SpecError, StorageError, TrainingCancelledError
from ensembles.registry import lifecycle, rows, versioning
from ensembles.registry.base import StoredObject
from ensembles.registry.instances import sweep_dead_locks
from ensembles.registry.names import describe, validate_model_name
from ensembles.registry.records import (
    JOB_STATUSES,
    UNFINISHED,
    JobRecord,
    VersionRecord,
    job_problem,
)
from ensembles.registry.schema import jobs
from ensembles.registry.transactions import SqlBase, json_copy, short_reason, utc_now

log = logging.getLogger(__name__)


class SqlJobs(SqlBase):
    """The :class:`~ensembles.registry.base.JobRegistry` role on SQL."""

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
            failed = self._run_write(lambda conn: lifecycle.interrupt(conn, dead, utc_now()))
            log.warning("failed %d job(s) of stopped instances: %s", len(failed), failed)
        return failed

    def submit_job(
        self, model: str, request: dict[str, object], *, max_open: int | None = None
    ) -> JobRecord:
        """Reserve the next version number of ``model`` and queue a job for it, atomically.

        ``max_open`` bounds the jobs queued or running in the whole registry (every
        process sharing it): QueueFullError, and nothing reserved, when that many are.
        """
        name = validate_model_name(model)
        stored = json_copy(request, "the training request")
        return self._run_write(
            lambda conn: lifecycle.submit(conn, name, stored, self.instance_id, utc_now(), max_open)
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
        return self._run_write(
            lambda conn: lifecycle.start(conn, job_id, self.instance_id, utc_now())
        )

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
            lambda conn: lifecycle.start_next(conn, self.instance_id, max_running, utc_now())
        )

    def fail_queued_jobs(self, problem: dict[str, object]) -> list[JobRecord]:
        """Fail the jobs this instance queued and nobody started (when it stops)."""
        stored = json_copy(problem, "the job error")

        def fail(conn: Connection) -> list[JobRecord]:
            ids = lifecycle.fail_queued_of(conn, self.instance_id, stored, utc_now())
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
        return self._run_write(lambda conn: lifecycle.request_cancel(conn, job_id, utc_now()))

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
        stored = None if error is None else json_copy(error, "the job error")
        return self._run_write(
            lambda conn: lifecycle.finish(conn, job_id, status, stored, utc_now())
        )

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
            self._run_write(lambda conn: lifecycle.cancel_if_unfinished(conn, job_id, utc_now()))
            raise TrainingCancelledError(f"job {job_id} was cancelled before it was published")
        name, number = validate_model_name(job.model), job.version
        what = describe(name, number)
        try:
            document = json_copy(metadata, "the version metadata")
        except TypeError as exc:
            raise self._storage_failure(job_id, f"could not record {what}: {exc}") from exc
        try:
            written = self.store.write_artifact(name, number, model)
        except Exception as exc:
            detail = f"could not write the artifact of {what}: {short_reason(exc)}"
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
        now = utc_now()
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
                lambda conn: lifecycle.fail_if_unfinished(conn, job_id, problem, utc_now())
            )
        except StorageError as exc:
            log.error("job %s could not be marked failed: %s", job_id, exc)
        return StorageError(detail)


if TYPE_CHECKING:
    from ensembles.registry.base import JobRegistry

    def _implements_the_role(part: SqlJobs) -> JobRegistry:
        return part  # mypy proves the part alone satisfies its role
