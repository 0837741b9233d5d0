"""What belongs to the server process rather than to one app: logging and signals.

Under uvicorn, SIGTERM (or SIGINT) starts a graceful shutdown: uvicorn stops accepting
connections, lets the requests in flight finish (at most ``--timeout-graceful-shutdown``
seconds), then runs the app's lifespan shutdown. Two details are ours:

* requests that wait for a training job (``?wait=true``) would otherwise wait for a job
  that only ends when the shutdown ends; :func:`on_shutdown_signal` tells the job runner
  at once, so they answer 202 with the job as it is;
* after a graceful shutdown uvicorn raises the signal again with the handler it found
  at start (the default one), so the process would die by SIGTERM (status 143) although
  everything went well. :func:`exit_zero_after_shutdown`, the last step of the server's
  lifespan, blocks SIGTERM instead: that last raise is never delivered and the process
  exits 0. (As PID 1 in a container the kernel ignores it anyway; this is for
  ``make run`` and process supervisors.)

One of several server processes (``ENSEMBLE_WORKERS`` > 1, started by
:mod:`app.server.launcher`, which made the shared metrics folder) also watches its launcher:
should the launcher die without stopping it (SIGKILL), the process shuts down as after
SIGTERM rather than serve on as an orphan. And a process that cannot start leaves a note
in that folder, so the launcher exits with a failure status rather than 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Final

from app.logs import configure_logging
from app.server.memory import keep_big_buffers_mapped
from app.server.metrics_folder import shared_metrics_folder
from app.settings import Settings

SHUTDOWN_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
STARTUP_FAILED: Final = "startup-failed-"  # + pid: a note in the shared metrics folder
LAUNCHER_ENV: Final = "_ENSEMBLE_LAUNCHER_PID"  # set by the launcher for its server processes
LAUNCHER_POLL_S: Final = 1.0

log = logging.getLogger("app.process")  # its name before app/server/ (log filters)


_serving = threading.Event()  # set once in the server process, by configure_process


def configure_process(settings: Settings) -> None:
    """Set up the server process (never a test's): its logging, its exit status, its
    malloc's thresholds."""
    configure_logging(settings.log_level, settings.log_format)
    keep_big_buffers_mapped()
    _serving.set()
    launcher = os.environ.get(LAUNCHER_ENV, "")
    if shared_metrics_folder() is not None and launcher.isdigit():
        _watch_launcher(int(launcher))


def _watch_launcher(launcher: int) -> None:
    """SIGTERM to this process (a graceful shutdown) once ``launcher`` is no longer its
    parent (it may have died before this process got here)."""

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(LAUNCHER_POLL_S)
        log.warning("the launcher (process %d) is gone: shutting down", launcher)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="launcher-watch", daemon=True).start()


def launcher_gone() -> bool:
    """Whether this server process was started by a launcher that has died since."""
    launcher = os.environ.get(LAUNCHER_ENV, "")
    return _serving.is_set() and launcher.isdigit() and os.getppid() != int(launcher)


def report_startup_failure() -> None:
    """Tell the launcher (if any) that this server process could not start."""
    folder = shared_metrics_folder()
    if folder is not None and _serving.is_set():
        with contextlib.suppress(OSError):
            (folder / f"{STARTUP_FAILED}{os.getpid()}").touch()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def exit_zero_after_shutdown() -> None:
    """The service has shut down cleanly: let the server process exit 0, not by SIGTERM."""
    if _serving.is_set() and _in_main_thread() and hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


@contextmanager
def on_shutdown_signal(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` first when SIGTERM or SIGINT arrives, then the server's handler.

    Use it while serving (in the lifespan, after uvicorn installed its handlers); a
    no-op outside the main thread. ``callback`` must be safe in a signal handler.
    """
    if not _in_main_thread():
        yield
        return
    restore: list[tuple[signal.Signals, _Handler, _Handler]] = []
    for sig in SHUTDOWN_SIGNALS:
        previous = signal.getsignal(sig)
        if callable(previous):
            chained = _chain(callback, previous)
            signal.signal(sig, chained)
            restore.append((sig, chained, previous))
    try:
        yield
    finally:
        for sig, ours, theirs in restore:
            if signal.getsignal(sig) is ours:
                signal.signal(sig, theirs)


_Handler = Callable[[int, FrameType | None], object]


def _chain(first: Callable[[], None], then: _Handler) -> _Handler:
    def handler(signum: int, frame: FrameType | None) -> None:
        first()
        then(signum, frame)

    return handler
