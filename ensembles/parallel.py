"""Fitting an ensemble's members in parallel, with progress and a cancel that reaches the fit.

scikit-learn fits the members of forests, the bagging family, voting and stacking through
``joblib.Parallel``; this module chooses where those calls run, as a joblib backend
(:class:`MemberPool`): threads of this process (``threads``, one per CPU the service may
use), or the workers of a Dask cluster (``dask_client``: joblib's Dask backend, used from
inside a task running on that cluster).  Either way the model is the one a one-shot fit
gives: every member's seed is drawn before the members are dispatched, and the results
are put back in order, so neither the number of workers nor how the work is cut changes
a bit of it (the tests compare with scikit-learn called directly).

Both backends are joblib's own with two additions (:class:`_Counting`):

* **progress without cost**: each finished batch of tasks adds its size to a
  :class:`MemberCount` (one member per task: a tree of a forest; the bagging family is cut
  into one member per task by answering ``effective_n_jobs`` with the member count, which
  only decides how scikit-learn slices the members it has already seeded);
* **cancel at once**: joblib aborts a ``Parallel`` call as soon as one of its tasks
  reports an error, so cancelling answers every pending task with
  :class:`~ensembles.errors.TrainingCancelledError` and the ``fit`` raises it within
  ``WATCH_S``, without waiting for the members being fitted (which finish in the
  background and are dropped).

A watcher thread reports progress and reads the cancel token while the fit runs, so the
caller's callbacks never run on joblib's result threads (or on the Dask client's event
loop).  A member task lost with its Dask worker surfaces as the error it is, where joblib
alone would wait for it forever.  BLAS stays single-threaded here (``threadpool_limits``;
Dask's nannies start their workers with one BLAS thread), so the members and BLAS do not
fight over the cores.
"""

from __future__ import annotations

import itertools
import os
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import joblib
from joblib.parallel import SequentialBackend, ThreadingBackend
from threadpoolctl import threadpool_limits

from ensembles.errors import TrainingCancelledError

WATCH_S: Final = 0.1  # how often the watcher reads the cancel token while members fit


@dataclass(frozen=True)
class _Failed:
    """A task the backend lost (its Dask worker died): the error it ends with."""

    error: BaseException


_CANCELLED: Final = object()


def member_frames(error: BaseException) -> list[Any]:
    """The frames of ``error``'s traceback, then those of the member task that raised it
    (innermost last), when it came out of a member fitted in parallel."""
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
    inner = getattr(error, "member_traceback", None)
    return frames + [frame for frame, _ in traceback.walk_tb(inner)]


class MemberCount:
    """Tasks dispatched and finished in the current fit; the callbacks of the pending ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._pending: dict[int, Callable[[Any], None]] = {}
        self.done = 0
        self.aborted = False
        self.changed = threading.Event()

    def dispatched(self, callback: Callable[[Any], None]) -> int:
        with self._lock:
            ticket = next(self._ids)
            self._pending[ticket] = callback
            return ticket

    def finished(self, ticket: int, size: int) -> Callable[[Any], None] | None:
        """The task's joblib callback, or None when the fit was aborted meanwhile."""
        with self._lock:
            callback = self._pending.pop(ticket, None)
            if callback is not None:
                self.done += size
        self.changed.set()
        return callback

    def abort(self) -> None:
        """Answer every pending task "cancelled": the ``Parallel`` call raises at once."""
        with self._lock:
            self.aborted = True
            callbacks = list(self._pending.values())
            self._pending.clear()
        for callback in callbacks:
            callback(_CANCELLED)


class _Counting:
    """What both backends add to joblib's: counting finished tasks, aborting pending ones."""

    counter: MemberCount
    slices: int | None
    nesting_level: int | None

    def submit(self, func: Any, callback: Callable[[Any], None] | None = None) -> Any:
        if callback is None:
            return super().submit(func, callback)  # type: ignore[misc]
        size = len(func) if hasattr(func, "__len__") else 1
        ticket = self.counter.dispatched(callback)

        def done(out: Any) -> None:
            pending = self.counter.finished(ticket, size)
            if pending is not None:
                pending(out)

        future = super().submit(func, callback=done)  # type: ignore[misc]
        add_done = getattr(future, "add_done_callback", None)
        if add_done is not None:  # Dask: a lost task sets the error, never the callback

            def failed(f: Any) -> None:
                error = f.exception() if not f.cancelled() else None
                if error is not None:
                    done(_Failed(error))

            add_done(failed)
        return future

    def retrieve_result_callback(self, out: Any) -> Any:
        if out is _CANCELLED:
            raise TrainingCancelledError("training was cancelled")
        if isinstance(out, _Failed):
            raise out.error
        try:
            return super().retrieve_result_callback(out)  # type: ignore[misc]
        except BaseException as error:
            # joblib drops the traceback before raising it in the caller's thread; keep
            # the member's frames (threads: the very frames that failed) for whoever
            # wants to know which estimator raised (ensembles.fit_errors.attribute).
            error.member_traceback = error.__traceback__  # type: ignore[attr-defined]
            raise

    def effective_n_jobs(self, n_jobs: int | None) -> int:
        """How many parts callers cut their work into: one per member when known."""
        if self.slices:
            return self.slices
        return super().effective_n_jobs(n_jobs)  # type: ignore[misc,no-any-return]

    def get_nested_backend(self) -> tuple[Any, None]:
        """Members' own inner ``Parallel`` calls run in their task, one after another."""
        return SequentialBackend(nesting_level=(self.nesting_level or 0) + 1), None


class _MemberThreads(_Counting, ThreadingBackend):  # type: ignore[misc]
    """joblib's thread pool of ``threads`` threads (one thread too: the fit then runs off
    the calling thread, which stays free to abort it)."""

    def __init__(self, threads: int, counter: MemberCount, slices: int | None) -> None:
        super().__init__()
        self.threads, self.counter, self.slices = threads, counter, slices

    def configure(self, n_jobs: int = 1, parallel: Any = None, **_: Any) -> int:
        self.parallel = parallel
        self._n_jobs = self.threads  # the pool's size
        # What Parallel is told: never 1, or it would run the tasks itself, uncounted.
        return max(2, self.threads)


def _dask_backend(client: Any, counter: MemberCount, slices: int | None) -> Any:
    """joblib's Dask backend on ``client``, counting and abortable."""
    from joblib._dask import DaskDistributedBackend  # joblib registers it by this class

    class MemberTasks(_Counting, DaskDistributedBackend):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(client=client)
            self.counter, self.slices = counter, slices

        def configure(self, n_jobs: int = 1, parallel: Any = None, **_: Any) -> int:
            self.parallel = parallel
            return int(DaskDistributedBackend.effective_n_jobs(self, -1))

    return MemberTasks()


@dataclass(frozen=True)
class MemberPool:
    """Where members are fitted: ``threads`` threads here, or the cluster of ``dask_client``
    (a ``distributed.Client``; from inside a task, ``distributed.get_client()``)."""

    threads: int = 1
    dask_client: Any = None

    @classmethod
    def local(cls, threads: int | None = None) -> MemberPool:
        """Threads here: ``threads``, or one per CPU this process may run on."""
        if threads is None:
            try:
                threads = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                threads = os.cpu_count() or 1
        return cls(threads=max(1, threads))

    @property
    def task_threads(self) -> int:
        """Threads a library's own fit may use in this task: the pool's here, the Dask
        worker's threads on a cluster (the task runs there, one per job)."""
        if self.dask_client is None:
            return self.threads
        try:
            from distributed import get_worker

            return max(1, int(get_worker().state.nthreads))
        except (ImportError, ValueError, AttributeError):
            return self.threads

    @property
    def where(self) -> str:
        return "dask" if self.dask_client is not None else f"{self.threads} threads"

    def backend(self, counter: MemberCount, slices: int | None) -> Any:
        if self.dask_client is not None:
            return _dask_backend(self.dask_client, counter, slices)
        return _MemberThreads(self.threads, counter, slices)


@contextmanager
def members_in_parallel(
    pool: MemberPool,
    *,
    members: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[MemberCount]:
    """Run the ``Parallel`` calls of the fit inside on ``pool``; ``members``: how many the
    fit makes (then ``on_progress(done)`` as they finish), None when unknown.

    ``cancelled`` is read every WATCH_S: once true, the fit raises TrainingCancelledError.
    """
    counter = MemberCount()
    stop = threading.Event()

    def watch() -> None:
        reported = 0
        while not stop.is_set():
            counter.changed.wait(WATCH_S)
            counter.changed.clear()
            if on_progress is not None and members and counter.done != reported:
                reported = counter.done
                on_progress(min(reported, members))
            if cancelled is not None and not counter.aborted and cancelled():
                counter.abort()

    watcher = threading.Thread(target=watch, name="members-watch", daemon=True)
    backend = pool.backend(counter, members)
    with threadpool_limits(limits=1, user_api="blas"), joblib.parallel_config(backend=backend):
        watcher.start()
        try:
            yield counter
        finally:
            stop.set()
            counter.changed.set()
            watcher.join()
    if counter.aborted:
        raise TrainingCancelledError("training was cancelled")
