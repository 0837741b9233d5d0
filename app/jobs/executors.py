"""Where training jobs run: the executor protocol of the job runner, and local processes.

The runner (:mod:`app.jobs.runner`) owns a job's life cycle — queue, start, timeout, cancel,
settling what a dead worker left — and hands the running itself to a
:class:`JobExecutor`: it starts one :class:`Execution` per job, asks whether it ended,
asks it to stop (``terminate``) and, if it does not, forces it (``kill``). Two
implementations, chosen by configuration only:

* :class:`ProcessExecutor` (the default): one local worker process per job
  (multiprocessing's ``forkserver`` context: children are forked from a small
  single-threaded server that preloaded the library, never from the threaded server
  process), so a crash or an out-of-memory kill fails that job and nothing else;
* :class:`app.jobs.cluster.DaskExecutor` (``ENSEMBLE_DASK_SCHEDULER``): one task per job on a
  Dask cluster, its members fitted across the cluster's workers.

Either way the job records its own outcome in the registry (a version, or why it
failed); an execution that ended without one is settled by the runner with
:meth:`Execution.death` as the reason.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Protocol

from app.jobs import fork_server
from app.jobs.worker import run_job
from ensembles.job_tasks import WorkerConfig

log = logging.getLogger("app.executors")  # its name before app/jobs/ (log filters)


class Execution(Protocol):
    """One job running somewhere."""

    @property
    def pid(self) -> int | None:
        """The process that trains it (for operators and tests), None when not known."""

    def ended(self) -> bool:
        """Whether it stopped running (its outcome, if any, is in the registry)."""

    def terminate(self) -> None:
        """Ask it to stop now, recording nothing (the runner records why)."""

    def kill(self) -> None:
        """Force it to stop: it has not heeded ``terminate``."""

    def join(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds for it to end; blocking (call in a thread)."""

    def close(self) -> None:
        """Release what it holds; it ended."""

    def death(self) -> str:
        """Why it ended without recording an outcome, for the job's problem."""


def exit_sentinel(execution: Execution) -> int | None:
    """A file descriptor that becomes readable when ``execution`` ends (a local worker's
    process sentinel), or None: the runner then notices the end at its next tick only."""
    sentinel = getattr(execution, "sentinel", None)
    return sentinel if isinstance(sentinel, int) else None


class JobExecutor(Protocol):
    """Starts executions; one per app (server process)."""

    def warm_up(self) -> None:
        """Make the first start quick (blocking; called once, in a thread)."""

    def start(self, config: WorkerConfig) -> Execution:
        """Start the job of ``config`` (blocking; call in a thread)."""

    def readiness(self) -> str:
        """``"ok"``, or why jobs cannot run (for /readyz); never blocks."""

    def close(self) -> None:
        """The app stops; every execution has ended or been killed."""


class ProcessExecutor:
    """Each job in its own local worker process.

    ``preload`` (``ENSEMBLE_PRELOAD_TRAINING``): the warm-up starts the fork server, else
    the first job's start does (multiprocessing starts it when a process is started), and
    a process that never trains never pays its preload."""

    def __init__(self, *, preload: bool = True) -> None:
        self._context = fork_server.context()
        self._preload = preload

    def warm_up(self) -> None:
        if not self._preload:
            return
        try:
            fork_server.start()  # already running when the launcher started it
        except Exception:  # the first job will try again and report
            log.exception("could not start the training fork server")

    def start(self, config: WorkerConfig) -> Execution:
        reader, writer = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=run_job, args=(config, reader), name=f"train-{config.job_id}", daemon=True
        )
        try:
            process.start()
        except BaseException:
            writer.close()
            raise
        finally:
            reader.close()  # the child has its own copy now
        return _ProcessExecution(process, writer)

    def readiness(self) -> str:
        return "ok"

    def close(self) -> None:
        return None


class _ProcessExecution:
    def __init__(self, process: BaseProcess, alive: Connection) -> None:
        self.process = process
        self.alive = alive  # the write end of the worker's server-alive pipe (never written)
        self._exitcode: int | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def sentinel(self) -> int:
        """Readable once the worker process has ended (see :func:`exit_sentinel`)."""
        return self.process.sentinel

    def ended(self) -> bool:
        self._exitcode = self.process.exitcode
        return self._exitcode is not None

    def terminate(self) -> None:
        if self.process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()

    def kill(self) -> None:
        if self.process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    def join(self, timeout: float) -> None:
        self.process.join(timeout)

    def close(self) -> None:
        self.alive.close()
        with contextlib.suppress(ValueError):
            self.process.close()

    def death(self) -> str:
        exitcode = self._exitcode
        if exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = f"signal {-exitcode}"
            hint = " (often: it ran out of memory)" if name == "SIGKILL" else ""
            return f"the training process was killed by {name}{hint}"
        return f"the training process exited with code {exitcode} before recording a result"
