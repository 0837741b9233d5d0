"""The job runner: training jobs run by an executor, a bounded queue, supervision.

Each job runs in its own local worker process, or as a task on a Dask cluster when
``ENSEMBLE_DASK_SCHEDULER`` is set (:mod:`app.jobs.executors`, :mod:`app.jobs.cluster`), so a
crash, an out-of-memory kill or a dying Dask worker fails that job and nothing else.

The queue is the jobs table, shared by every server process of the service (there are
``ENSEMBLE_WORKERS`` of them, each with its runner): at most ``max_concurrent_jobs`` run
at once in the whole service, the oldest queued job starts first whichever process
accepted it, and a submit is refused (429) when ``max_concurrent_jobs +
max_queued_jobs`` jobs are open; the registry counts inside its write transactions.
A runner looks for a job to start when one of its own jobs is queued or ends, and every
``CLAIM_POLL_S`` (a cheap read) for the jobs of the others.  A local worker's exit wakes
the runner at once (its process sentinel is watched on the event loop), so a job is
settled, and a request waiting for it answered, as soon as its worker is gone, not at
the next ``TICK_S`` (on average half a tick, up to 0.1 s, of every job's wall).
Every ``DEAD_SCAN_S`` it also fails the jobs of instances that died (a replica
SIGKILLed, its lease run out), so they do not hold the service's running slots until
some instance restarts.

The runner, an asyncio task of the server, owns the job's life cycle around the worker:
it marks a job running before starting its execution (so the job belongs to this server
instance, and a restart after a crash of the server fails it), watches the executions,
and settles every job whose worker ended without settling it (killed, crashed, timed
out, or terminated after a cancel it did not honour in time). Workers report progress
and read the cancel flag through the registry database, so the status and a cancel
work from any server process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from app.jobs.executors import Execution, JobExecutor, ProcessExecutor, exit_sentinel
from app.metrics import Metrics
from app.settings import Settings
from app.threads import in_thread
from ensembles import Problem
from ensembles.errors import ConflictError, NotFoundError, QueueFullError, StorageError
from ensembles.job_tasks import WorkerConfig
from ensembles.registry import JobRecord, Registry, job_problem
from ensembles.registry.documents import JobDocument

log = logging.getLogger("app.jobs")  # the job events: logged under the package name

TICK_S: Final = 0.1
CANCEL_SCAN_S: Final = 0.5
CLAIM_POLL_S: Final = 0.5
CLAIM_BACKOFF_S: Final = 5.0
WAIT_POLL_S: Final = 0.25
SETTLE_S: Final = 2.0
DEAD_SCAN_S: Final = 5.0
KILL_AFTER_S: Final = 3.0
FINISHED: Final = ("succeeded", "failed", "cancelled")
SHUTDOWN_RUNNING: Final = (
    "interrupted by shutdown: the service stopped while this job was running; submit it again"
)
SHUTDOWN_QUEUED: Final = (
    "interrupted by shutdown: the service stopped before this job started; submit it again"
)

Reason = Literal["timeout", "cancelled"]


@dataclass
class _Running:
    execution: Execution
    deadline: float
    cancel_deadline: float | None = None
    reason: Reason | None = None
    kill_at: float | None = None
    watched: int | None = None  # the exit sentinel the loop reads, until it fires or closes


class JobRunner:
    """Queue and supervise training worker processes; every method runs on the event loop."""

    def __init__(
        self,
        registry: Registry,
        settings: Settings,
        metrics: Metrics | None = None,
        executor: JobExecutor | None = None,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.metrics = metrics
        self.executor: JobExecutor = executor or ProcessExecutor()
        self._running: dict[str, _Running] = {}
        self._claim_now = True  # look for a job to start at the next round
        self._last_claim = 0.0
        self._events: dict[str, asyncio.Event] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._warming: asyncio.Task[None] | None = None
        self._loop_ref: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._draining = False
        self._last_scan = 0.0
        self._last_dead_scan = time.monotonic()  # the registry has just recovered

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        self._loop_ref = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._loop(), name="job-runner")
        # Start the fork server now, in the background, so the first job starts quickly.
        self._warming = asyncio.create_task(
            in_thread(self.executor.warm_up), name="executor-warm-up"
        )

    def drain(self) -> None:
        """The service is shutting down: requests waiting for a job answer now (202).

        Safe to call from a signal handler: it only sets a flag and schedules a wake-up.
        """
        self._draining = True
        loop = self._loop_ref
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake_waiters)

    def _wake_waiters(self) -> None:
        for event in self._events.values():
            event.set()

    @property
    def draining(self) -> bool:
        return self._draining

    async def stop(self) -> None:
        """Stop supervising, end the workers and fail the jobs they were running, and
        the queued ones, as "interrupted by shutdown"."""
        # A flag, not task.cancel(): a cancel arriving while the loop waits for a thread
        # (anyio shields those waits) could be swallowed and leave the loop running.
        self._draining = self._stopping = True
        self._wake.set()
        self._wake_waiters()
        for task in (self._task, self._warming):
            if task is not None:
                await task
        for entry in self._running.values():
            self._unwatch(entry)
            entry.execution.terminate()
        await in_thread(self._join_all, KILL_AFTER_S)
        for entry in self._running.values():
            await in_thread(entry.execution.close)
        interrupted = list(self._running)
        self._running.clear()
        for job_id in interrupted:
            problem = job_problem("interrupted", "Training interrupted", SHUTDOWN_RUNNING)
            await self._finish(job_id, "failed", problem)
        # The jobs this process queued that nobody started (another process may have).
        problem = job_problem("interrupted", "Training interrupted", SHUTDOWN_QUEUED)
        try:
            failed = await in_thread(self.registry.fail_queued_jobs, problem)
        except StorageError:
            log.exception("could not fail the queued jobs")
            failed = []
        for job in failed:
            self._transition(job)
            self._settled(job.id)
        await in_thread(self.executor.close)

    def _join_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for entry in self._running.values():
            entry.execution.join(max(0.0, deadline - time.monotonic()))
            if not entry.execution.ended():
                entry.execution.kill()
                entry.execution.join(1.0)

    @property
    def healthy(self) -> bool:
        return self._task is not None and not self._task.done()

    def readiness(self) -> str:
        """``"ok"``, or why the runner cannot take jobs (for /readyz)."""
        if self._draining:
            return "the service is shutting down"
        if not self.healthy:
            return "the job runner is not running"
        return self.executor.readiness()

    def worker_pid(self, job_id: str) -> int | None:
        """The process id of a running job's worker (for operators and tests; blocking
        with a Dask executor, which asks the cluster)."""
        entry = self._running.get(job_id)
        return None if entry is None else entry.execution.pid

    # ------------------------------------------------------------------ submitting

    async def submit(self, model: str, document: JobDocument) -> JobRecord:
        """Queue a job (reserving its version); QueueFullError (429) when the service
        already has ``max_concurrent_jobs + max_queued_jobs`` jobs open."""
        settings = self.settings
        try:
            job = await in_thread(
                self.registry.submit_job,
                model,
                document.to_json(),
                max_open=settings.max_concurrent_jobs + settings.max_queued_jobs,
            )
        except QueueFullError as exc:
            limit = (
                f"at most {settings.max_queued_jobs} jobs may wait "
                f"(ENSEMBLE_MAX_QUEUED_JOBS) and {settings.max_concurrent_jobs} run "
                "(ENSEMBLE_MAX_CONCURRENT_JOBS)"
            )
            raise QueueFullError(exc.detail, [Problem((), limit)]) from None
        self._transition(job)
        self._claim_soon()
        return job

    def _claim_soon(self) -> None:
        self._claim_now = True
        self._wake.set()

    async def cancel(self, job_id: str) -> JobRecord:
        """Cancel now when queued; when running, the worker stops at its next check, or
        is terminated after ``cancel_grace_s``. ConflictError when the job already ended."""
        job = await in_thread(self.registry.request_cancel, job_id)
        if job.status == "cancelled":
            self._transition(job)
            self._settled(job_id)
        elif (entry := self._running.get(job_id)) is not None:
            self._arm_cancel(entry)
        return job

    def _arm_cancel(self, entry: _Running) -> None:
        if entry.cancel_deadline is None:
            entry.cancel_deadline = time.monotonic() + self.settings.cancel_grace_s
            self._wake.set()

    async def wait(self, job_id: str, timeout: float) -> JobRecord:
        """The job once it ended, or as it is after ``timeout`` seconds.

        A job that ends in this process wakes the wait at once; one that runs in another
        server process is seen at the next read (every WAIT_POLL_S).
        """
        deadline = time.monotonic() + timeout
        event = self._events.setdefault(job_id, asyncio.Event())
        ended_at: float | None = None
        try:
            while True:
                job = await in_thread(self.registry.get_job, job_id)
                now = time.monotonic()
                remaining = deadline - now
                if job.status in FINISHED and ended_at is None:
                    ended_at = now
                # A job of this process is over once the runner settled it (its worker
                # gone, its end logged), which follows the database at once.
                settling = job_id in self._running and now - (ended_at or now) < SETTLE_S
                if (job.status in FINISHED and not settling) or remaining <= 0 or self._draining:
                    return job
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(remaining, WAIT_POLL_S))
        finally:
            if self._events.get(job_id) is event:
                del self._events[job_id]

    def _settled(self, job_id: str) -> None:
        event = self._events.get(job_id)
        if event is not None:
            event.set()
        self._claim_soon()  # a slot may have freed

    # ------------------------------------------------------------------ the loop

    async def _loop(self) -> None:
        while not self._stopping:
            # Cleared before the round, not after: a wake during it (a worker's exit seen
            # while the round waited for a thread) starts the next round at once.
            self._wake.clear()
            try:
                await self._supervise()
                await self._fail_dead_jobs()
                await self._start_queued()
            except Exception:  # keep supervising whatever one round hit
                log.exception("job runner round failed")
            if self._stopping:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), TICK_S)

    async def _fail_dead_jobs(self) -> None:
        now = time.monotonic()
        if now - self._last_dead_scan < DEAD_SCAN_S:
            return
        self._last_dead_scan = now
        try:
            failed = await in_thread(self.registry.fail_dead_jobs)
        except StorageError as exc:
            log.warning("could not look for the jobs of stopped instances: %s", exc)
            return
        if failed:
            self._claim_soon()  # their slots are free

    async def _start_queued(self) -> None:
        """Start the service's oldest queued jobs while it runs fewer than
        ``max_concurrent_jobs`` (none once shutting down: they would be interrupted)."""
        now = time.monotonic()
        if self._draining or not (self._claim_now or now - self._last_claim >= CLAIM_POLL_S):
            return
        self._claim_now, self._last_claim = False, now
        limit = self.settings.max_concurrent_jobs
        while len(self._running) < limit and not self._draining:
            try:
                job = await in_thread(self.registry.start_next_job, limit)
            except StorageError as exc:
                log.warning("could not look for a queued job to start: %s", exc)
                self._last_claim += CLAIM_BACKOFF_S  # the database is down: fewer tries
                return
            if job is None:
                return
            job_id = job.id
            self._transition(job)
            try:
                execution = await in_thread(self.executor.start, self._config(job_id))
            except Exception as exc:
                log.exception("could not start a worker for %s", job_id)
                detail = f"could not start a training process: {type(exc).__name__}: {exc}"
                problem = job_problem("worker_crashed", "Training process died", detail)
                await self._finish(job_id, "failed", problem)
                continue
            deadline = time.monotonic() + self.settings.job_timeout_s
            entry = _Running(execution, deadline)
            self._running[job_id] = entry
            self._watch_exit(entry)
            log.debug("job %s started", job_id)

    def _watch_exit(self, entry: _Running) -> None:
        """Wake the loop when the execution's exit sentinel becomes readable (once: the
        reader is removed as it fires, so a dead worker's readable pipe does not spin the
        loop until it is settled)."""
        sentinel = exit_sentinel(entry.execution)
        loop = self._loop_ref
        if sentinel is None or loop is None:
            return

        def exited() -> None:
            self._unwatch(entry)
            self._wake.set()

        try:
            loop.add_reader(sentinel, exited)
        except (NotImplementedError, ValueError, OSError):  # a loop without readers: ticks
            return
        entry.watched = sentinel

    def _unwatch(self, entry: _Running) -> None:
        """Stop reading the exit sentinel (before the execution is closed: its descriptor
        may be reused)."""
        sentinel, entry.watched = entry.watched, None
        loop = self._loop_ref
        if sentinel is not None and loop is not None and not loop.is_closed():
            loop.remove_reader(sentinel)

    def _config(self, job_id: str) -> WorkerConfig:
        return WorkerConfig(
            data_dir=str(Path(self.settings.data_dir).resolve()),
            database_url=self.settings.database_url,
            job_id=job_id,
            store=self.settings.store,
            memory_limit_mb=self.settings.job_memory_limit_mb,
            log_level=self.settings.log_level,
            log_format=self.settings.log_format,
        )

    async def _supervise(self) -> None:
        now = time.monotonic()
        if self._running and now - self._last_scan >= CANCEL_SCAN_S:
            self._last_scan = now
            await self._scan_cancel_flags()
        for job_id, entry in list(self._running.items()):
            if entry.execution.ended():
                del self._running[job_id]
                await self._settle_exited(job_id, entry)
                continue
            if entry.reason is None and now > entry.deadline:
                self._stop(job_id, entry, "timeout", now)
            elif entry.reason is None and entry.cancel_deadline and now > entry.cancel_deadline:
                self._stop(job_id, entry, "cancelled", now)
            elif entry.kill_at is not None and now > entry.kill_at:
                entry.execution.kill()

    async def _scan_cancel_flags(self) -> None:
        """Cancels asked elsewhere (another instance, a deleted model) also get a deadline."""
        try:
            running = await in_thread(self.registry.list_jobs, "running")
        except StorageError:
            return
        for job in running:
            entry = self._running.get(job.id)
            if entry is not None and job.cancel_requested:
                self._arm_cancel(entry)

    def _stop(self, job_id: str, entry: _Running, reason: Reason, now: float) -> None:
        log.warning("stopping job %s (%s)", job_id, reason)
        entry.reason = reason
        entry.kill_at = now + KILL_AFTER_S
        entry.execution.terminate()

    async def _settle_exited(self, job_id: str, entry: _Running) -> None:
        """The worker is gone: if it did not record an outcome, record one for it."""
        self._unwatch(entry)
        await in_thread(entry.execution.close)
        try:
            job = await in_thread(self.registry.get_job, job_id)
        except (NotFoundError, StorageError):
            log.exception("could not read job %s after its worker ended", job_id)
            return
        if job.status in FINISHED:
            self._transition(job)
            self._settled(job_id)
            return
        status, error = self._outcome(job, entry.reason, entry.execution.death())
        await self._finish(job_id, status, error)

    def _outcome(
        self, job: JobRecord, reason: Reason | None, death: str
    ) -> tuple[Literal["failed", "cancelled"], dict[str, object] | None]:
        if reason == "timeout":
            limit = f"{self.settings.job_timeout_s:g}"
            detail = (
                f"the job ran longer than {limit} s (ENSEMBLE_JOB_TIMEOUT_S) and was stopped; "
                "train fewer or smaller estimators"
            )
            return "failed", job_problem("timeout", "Training took too long", detail)
        if reason == "cancelled" or job.cancel_requested:
            return "cancelled", None
        return "failed", job_problem("worker_crashed", "Training process died", death)

    async def _finish(
        self, job_id: str, status: Literal["failed", "cancelled"], error: dict[str, object] | None
    ) -> None:
        try:
            job = await in_thread(self.registry.finish_job, job_id, status, error)
        except ConflictError:
            # It ended meanwhile (the worker published, or recorded its own end): say how.
            with contextlib.suppress(NotFoundError, StorageError):
                self._transition(await in_thread(self.registry.get_job, job_id))
        except StorageError:
            log.exception("could not record the end of job %s", job_id)
        else:
            self._transition(job)
        self._settled(job_id)

    def _transition(self, job: JobRecord) -> None:
        """One log line per change of a job's status; the duration of ended jobs."""
        fields: dict[str, object] = {
            "event": "job",
            "job_id": job.id,
            "model": job.model,
            "version": job.version,
            "status": job.status,
        }
        if job.status in FINISHED and job.started_at and job.finished_at:
            seconds = (job.finished_at - job.started_at).total_seconds()
            fields["duration_s"] = round(seconds, 3)
            if self.metrics is not None:
                self.metrics.observe_training(job.status, seconds)
        if job.error:
            fields["error_code"] = job.error.get("code")
            fields["error_detail"] = job.error.get("detail")
        level = logging.WARNING if job.status == "failed" else logging.INFO
        log.log(level, "job %s %s", job.id, job.status, extra={"fields": fields})
