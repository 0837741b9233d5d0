"""Serving the app: ``python -m app`` and ``make run`` start uvicorn here.

With ``ENSEMBLE_WORKERS`` = 1 (the default) uvicorn serves in this process, as it always
did. With N > 1 this process becomes uvicorn's supervisor: it binds the port once and
starts N server processes that accept connections on it, each with its own app (event
loop, model cache, job runner), restarts one that dies, and on SIGTERM or SIGINT sends
each SIGTERM and waits for their graceful shutdown. Before they start it makes the
private folder where they write their metrics (:mod:`app.server.metrics_folder`), and removes
it once they have stopped.

Exit status: 0 after a shutdown asked by a signal, 2 for invalid settings or a
dependency they name that cannot be reached at start (:mod:`app.server.preflight`), 3 when a
server process could not start (uvicorn's own status for that when it serves alone).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Final

import uvicorn
from pydantic import ValidationError

from app.logs import configure_logging
from app.server import metrics_folder
from app.server.http_protocol import PROTOCOL
from app.server.process import LAUNCHER_ENV, STARTUP_FAILED
from app.settings import Settings

APP: Final = "app.main:create_app"
EXIT_SETTINGS: Final = 2
EXIT_STARTUP: Final = 3

log = logging.getLogger("app.launcher")


def load_settings() -> Settings:
    """The settings from the environment, or exit 2 naming each bad variable."""
    try:
        settings = Settings()
    except ValidationError as exc:
        for error in exc.errors():
            name = "ENSEMBLE_" + "_".join(str(part) for part in error["loc"]).upper()
            message = str(error["msg"]).removeprefix("Value error, ")
            print(f"invalid setting {name}: {message}", file=sys.stderr)
        sys.exit(EXIT_SETTINGS)
    return settings


def check_dependencies(settings: Settings) -> None:
    """Exit 2, one line per problem naming its setting, unless every dependency answers."""
    from app.server import preflight  # imports the library: after start_fork_server

    found = preflight.problems(settings)
    for problem in found:
        print(f"cannot start: {problem}", file=sys.stderr)
    if found:
        from app.jobs import fork_server

        fork_server.stop()  # started beside the checks, for nothing: ends with this process
        sys.exit(EXIT_SETTINGS)


def serve(settings: Settings, host: str, port: int) -> int:
    """Serve until a signal stops the service; the exit status."""
    configure_logging(settings.log_level, settings.log_format)
    workers = settings.worker_count
    log.info(
        "serving on http://%s:%d with %d server process%s",
        host,
        port,
        workers,
        "" if workers == 1 else "es",
        extra={
            "fields": {
                "event": "start",
                "workers": workers,
                "workers_setting": str(settings.workers),
                "host": host,
                "port": port,
            }
        },
    )
    if workers == 1:
        os.environ.pop(metrics_folder.ENV, None)  # one process: its own metrics, as ever
        _uvicorn(settings, host, port, workers)
        return 0
    folder = Path(tempfile.mkdtemp(prefix="ensemble-metrics-"))
    os.environ[metrics_folder.ENV] = str(folder)  # the server processes inherit both
    os.environ[LAUNCHER_ENV] = str(os.getpid())
    try:
        _uvicorn(settings, host, port, workers)
        failed = sorted(path.name for path in folder.glob(f"{STARTUP_FAILED}*"))
        if failed:
            pids = ", ".join(name.removeprefix(STARTUP_FAILED) for name in failed)
            log.error("server process %s could not start; the service stopped", pids)
            return EXIT_STARTUP
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def start_fork_server(settings: Settings) -> None:
    """Start the training fork server now, its preload beside this process's own start
    (:mod:`app.jobs.fork_server`), when this process will serve and train locally
    (``ENSEMBLE_WORKERS`` = 1, no Dask scheduler) and preloads training
    (``ENSEMBLE_PRELOAD_TRAINING``); else nothing.  If it cannot start now, the job
    runner tries again."""
    if settings.worker_count != 1 or settings.dask_scheduler is not None:
        return
    if not settings.preload_training:
        return  # the first job starts it (app.jobs.executors.ProcessExecutor)
    from app.jobs import fork_server  # multiprocessing only: the preload is its own

    try:
        fork_server.start()
    except Exception:
        log.exception("could not start the training fork server; the job runner will retry")


def _uvicorn(settings: Settings, host: str, port: int, workers: int) -> None:
    uvicorn.run(
        APP,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http=PROTOCOL,  # uvicorn's, each answer in one write (app.server.http_protocol)
        timeout_graceful_shutdown=settings.shutdown_timeout_s,
        log_config=None,  # configured above; each server process configures its own
        # The service writes its own request lines (configure_logging silences uvicorn's
        # access logger); left on, uvicorn still made the line's arguments (the client's
        # address, the quoted path) for every answer: ~2 us of a one-row request.
        access_log=False,
    )
