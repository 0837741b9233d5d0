"""The training worker process: one per job, started by :mod:`app.jobs.executors`.

It shares nothing with the server but the data folder, database and object store: it
opens its own registry and runs the job (:func:`ensembles.jobs.run_training`), its
members on every CPU the process may use (:func:`app.settings.available_cpus`), then
exits. Around the job it sets up what belongs to the process: logging, signals, its
memory limit, and watching the server. Whatever goes wrong in here — a bad fit, a crash,
running out of memory — ends this process and this job only.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
import threading
from multiprocessing.connection import Connection

from app.logs import configure_logging
from app.settings import available_cpus
from ensembles.explain.trees import preload as preload_explanations
from ensembles.job_tasks import WorkerConfig as WorkerConfig
from ensembles.jobs import run_training
from ensembles.parallel import MemberPool
from ensembles.registry import open_registry

log = logging.getLogger("app.worker")

EXIT_SERVER_GONE = 70

# The fork server preloads this module: shap's compiled TreeSHAP, which
# metrics.explanations uses, is loaded there once rather than in every job's process.
preload_explanations()


def run_job(config: WorkerConfig, server_alive: Connection) -> None:
    """Process entry point: train one job and record its outcome in the registry.

    ``server_alive`` is the read end of a pipe whose only write end the server holds and
    never writes to: end of file means the server is gone.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the server's to handle
    # Everything the fork server preloaded (the library, scikit-learn, pandas: ~190,000
    # objects) lives as long as this process: kept out of the cyclic collector's scans,
    # a full collection costs this job's objects only, not 50-120 ms.
    gc.freeze()
    configure_logging(config.log_level, config.log_format)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # opening the registry: noise here
    _limit_memory(config.memory_limit_mb)
    parent_gone = threading.Event()
    _watch_server(server_alive, parent_gone)
    registry = open_registry(config.data_dir, config.database_url, config.store)
    try:
        pool = MemberPool.local(available_cpus())
        run_training(registry, config.job_id, pool, parent_gone.is_set)
    finally:
        registry.close()


def _limit_memory(limit_mb: int | None) -> None:
    if limit_mb is None or sys.platform == "win32":
        return
    import resource

    limit = limit_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _watch_server(server_alive: Connection, gone: threading.Event) -> None:
    """Exit as soon as the server dies, however it dies (SIGKILL included): no orphans.

    (The parent pid is no use here: the fork server is the parent, and it lives on as
    long as any of its children does.)
    """

    def watch() -> None:
        with contextlib.suppress(EOFError, OSError):
            server_alive.recv()
        gone.set()
        log.warning("the service process is gone; stopping")
        os._exit(EXIT_SERVER_GONE)

    threading.Thread(target=watch, name="server-watch", daemon=True).start()
