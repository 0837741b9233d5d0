"""The training fork server: the small process local worker processes are forked from,
with the library preloaded (:mod:`app.jobs.worker`: scikit-learn, pandas, LightGBM,
shap's TreeSHAP), so a job's process starts in milliseconds.

Preloading takes seconds of CPU (about 4 s on the benchmark machine).  It used to start
when the job runner started, once the server had imported and built its app, so a job
submitted in the first seconds after the service answered /readyz waited for it (a
100-tree forest submitted at once: its worker started 15.8 s after the submit on a
loaded machine, 0.05 s for the next job).  :func:`start` is now called by the launcher
before uvicorn imports the app, when the server serves in that very process
(``ENSEMBLE_WORKERS`` = 1, local workers): the preload runs beside the server's own
start.  Starting it is cheap (it spawns the process and returns); the runner's warm-up
later finds it running.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext
from typing import Any, Final

__all__ = ["PRELOAD", "context", "start", "stop"]

PRELOAD: Final = ["app.jobs.worker"]


def context() -> ForkServerContext:
    """multiprocessing's fork-server context, its preload set to :data:`PRELOAD`."""
    found = multiprocessing.get_context("forkserver")
    assert isinstance(found, ForkServerContext)
    found.set_forkserver_preload(PRELOAD)
    return found


def start() -> None:
    """Start this process's fork server if it is not running (raises what starting raises)."""
    context()
    forkserver.ensure_running()


def stop() -> None:
    """Stop this process's fork server now, if it started one: even in the middle of its
    preload, which it would otherwise finish (seconds of CPU) before noticing this process
    is gone.  For a launcher that exits without serving (a setting it cannot use): the
    service's processes end with it, and a caller reading its output until the end (a
    pipe, ``subprocess.run``) is not kept waiting by the preload."""
    # multiprocessing's own instance: no public stop in 3.11 (nor in typeshed's stubs)
    server: Any = forkserver._forkserver
    pid = server._forkserver_pid
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):  # ended already: _stop reaps it the same
        os.kill(pid, signal.SIGKILL)
    server._stop()  # closes its pipe and socket, and reaps it
