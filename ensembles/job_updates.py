"""A running job's round trips to the registry (its progress written, its cancel flag
read), made on a thread of their own.

Training reports progress and asks whether it was cancelled between boosting rounds:
LightGBM calls back after each of its 500 rounds, and while the callback runs its OpenMP
threads wait for the next round.  When the callback itself wrote the progress (a committed
write) and read the job's cancel flag (a read) every 0.25 s, a 500-round LightGBM job on
200,000 rows spent 0.35-0.5 s of its fit in those round trips (69 writes and 87 reads,
SQLite on the benchmark machine; a PostgreSQL registry over a network pays more), all of
it with the library's threads idle.  Here the callbacks only note what they were told and
read a flag; :class:`JobUpdates`'s thread does the writing and the reading.

What is recorded is what was recorded before: progress at most every
PROGRESS_INTERVAL_S, and at once at every change of stage and at a stage's last count
(300/300 would otherwise be skipped, and the job read 208/300 until the next stage); the
cancel flag read every CANCEL_POLL_S, ``stopped()`` (the server is gone; the runner
stops a Dask task) seen at once.  Progress is advisory: a failed write is logged and
training goes on; a failed read leaves the flag as it was.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

from ensembles.errors import StorageError
from ensembles.registry import Registry

__all__ = ["CANCEL_POLL_S", "PROGRESS_INTERVAL_S", "JobUpdates"]

log = logging.getLogger("ensembles.jobs")

PROGRESS_INTERVAL_S = 0.25
CANCEL_POLL_S = 0.25

Progress = tuple[int, int, str]


class JobUpdates:
    """``progress`` (a ``ProgressCallback``) and ``is_set`` (a ``CancelToken``) for one
    running job, neither of which waits for the registry; use as a context manager (the
    thread runs inside, and the last progress noted is written on leaving)."""

    def __init__(self, registry: Registry, job_id: str, stopped: Callable[[], bool]) -> None:
        self.registry, self.job_id, self.stopped = registry, job_id, stopped
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._noted: Progress | None = None
        self._urgent = False  # the noted progress is a stage's first or last: write it now
        self._stage = ""
        self._written: Progress | None = None
        self._cancelled = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ the training's side

    def progress(self, done: int, total: int, stage: str) -> None:
        """Note the progress; the thread writes it (at once when the stage changed or
        reached its last count, else within PROGRESS_INTERVAL_S)."""
        with self._lock:
            self._noted = (done, total, stage)
            if stage != self._stage or 0 < total <= done:
                self._stage, self._urgent = stage, True
                self._wake.set()

    def is_set(self) -> bool:
        """Whether the job was cancelled (as last read) or ``stopped()``."""
        return self._cancelled or self.stopped()

    # ------------------------------------------------------------ the thread

    def __enter__(self) -> JobUpdates:
        self._poll_cancel()  # a job cancelled before it started stops at its first check
        self._thread = threading.Thread(target=self._run, name="job-updates", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the thread, then write the last progress noted if it was not."""
        with self._lock:
            self._closing = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._write(force=True)

    def _run(self) -> None:
        last_write = last_poll = time.monotonic()
        while True:
            self._wake.wait(min(PROGRESS_INTERVAL_S, CANCEL_POLL_S))
            self._wake.clear()
            with self._lock:
                if self._closing:
                    return
            now = time.monotonic()
            try:
                if self._write(force=now - last_write >= PROGRESS_INTERVAL_S):
                    last_write = now
                if now - last_poll >= CANCEL_POLL_S:
                    last_poll = now
                    self._poll_cancel()
            except Exception:  # never the end of the thread: the cancel flag is read here
                log.exception("recording the state of %s failed", self.job_id)

    def _write(self, *, force: bool) -> bool:
        """Write the noted progress if it is new and urgent (or ``force``); whether it did."""
        with self._lock:
            noted, urgent = self._noted, self._urgent
            if noted is None or noted == self._written or not (urgent or force):
                return False
            self._written, self._urgent = noted, False
        try:
            self.registry.update_progress(self.job_id, *noted)
        except StorageError as exc:  # progress is advisory; training goes on
            log.warning("could not record progress of %s: %s", self.job_id, exc)
        return True

    def _poll_cancel(self) -> None:
        if self._cancelled:
            return
        try:
            job = self.registry.get_job(self.job_id)
        except StorageError:
            return
        self._cancelled = job.cancel_requested or job.status != "running"
