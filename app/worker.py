"""The training worker: one process per job, started by :mod:`app.jobs`.

It shares nothing with the server but the data folder, database and object store: it
opens its own registry, loads the dataset, trains with a progress callback and a cancel
token (both throttled database round trips), its members on every CPU the process may use
(:func:`app.settings.available_cpus`), chooses the engine that will serve the model (the
compiled one if it answers exactly as scikit-learn), publishes the version and exits.
Whatever goes wrong in here — a bad fit, a crash, running out of memory — ends this
process and this job only.

:func:`run_training` is the job itself, without the process around it: a task on a Dask
cluster runs it too (:mod:`app.cluster`), with its members on the cluster's workers.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from multiprocessing.connection import Connection
from typing import Any, Literal

from app.logs import configure_logging
from app.settings import available_cpus
from ensembles import (
    EnsembleError,
    FittedModel,
    TrainingCancelledError,
    TrainingData,
    inference_verdict,
    read_table,
    select_training_data,
    train,
)
from ensembles.errors import ConflictError, NotFoundError, StorageError
from ensembles.parallel import MemberPool
from ensembles.registry import Registry, job_problem, open_registry
from ensembles.registry.documents import JobDocument, VersionMetadata
from ensembles.registry.stores import StoreConfig

log = logging.getLogger("app.worker")

PROGRESS_INTERVAL_S = 0.25
CANCEL_POLL_S = 0.25
EXIT_SERVER_GONE = 70
_LIBRARIES = ("scikit-learn", "numpy", "scipy", "pandas", "joblib")


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs to know; pickled to the child process."""

    data_dir: str
    database_url: str | None
    job_id: str
    store: StoreConfig = field(default_factory=StoreConfig)
    memory_limit_mb: int | None = None
    log_level: str = "WARNING"
    log_format: Literal["json", "text"] = "json"


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


class _Progress:
    """Writes progress at most every PROGRESS_INTERVAL_S, and at every change of stage and
    a stage's last count (300/300 would otherwise be skipped, and the job read 208/300
    until the next stage)."""

    def __init__(self, registry: Registry, job_id: str) -> None:
        self.registry, self.job_id = registry, job_id
        self.last, self.stage = 0.0, ""
        self.written: tuple[int, int, str] | None = None

    def __call__(self, done: int, total: int, stage: str) -> None:
        now = time.monotonic()
        counted = 0 < total <= done
        if stage == self.stage and now - self.last < PROGRESS_INTERVAL_S and not counted:
            return
        if (done, total, stage) == self.written:
            return
        self.last, self.stage, self.written = now, stage, (done, total, stage)
        try:
            self.registry.update_progress(self.job_id, done, total, stage)
        except StorageError as exc:  # progress is advisory; training goes on
            log.warning("could not record progress of %s: %s", self.job_id, exc)


class _Cancel:
    """A cancel token that reads the job's flag at most every CANCEL_POLL_S, and is set
    at once when ``stopped()`` (the server is gone; the runner stops a Dask task)."""

    def __init__(self, registry: Registry, job_id: str, stopped: Callable[[], bool]) -> None:
        self.registry, self.job_id, self.stopped = registry, job_id, stopped
        self.last, self.set = 0.0, False

    def is_set(self) -> bool:
        if self.set or self.stopped():
            return True
        now = time.monotonic()
        if now - self.last >= CANCEL_POLL_S:
            self.last = now
            try:
                job = self.registry.get_job(self.job_id)
            except StorageError:
                return False
            self.set = job.cancel_requested or job.status != "running"
        return self.set


def run_training(
    registry: Registry,
    job_id: str,
    pool: MemberPool,
    stopped: Callable[[], bool],
    *,
    record_stop: bool = True,
) -> None:
    """Train a running job and record its outcome: its version, or why it failed.

    ``stopped()`` true: stop as after a cancel, and record the job cancelled unless
    ``record_stop`` is false (the runner that stopped it records why: timeout, shutdown).
    """
    job = registry.get_job(job_id)
    if job.status != "running":
        return
    cancel = _Cancel(registry, job_id, stopped)
    try:
        document = JobDocument.of(job)
        data = _training_data(registry, document)
        progress = _Progress(registry, job_id)
        fitted = train(
            data,
            document.ensemble,
            document.evaluation,
            document.random_state,
            on_progress=progress,
            cancel=cancel,
            pool=pool,
        )
        if cancel.is_set():
            raise TrainingCancelledError("training was cancelled")
        progress(0, 1, "compiling")
        inference = inference_verdict(
            fitted.pipeline, data.task, fitted.train_rows, document.random_state
        )
        metadata = version_metadata(job_id, document, data, fitted, inference)
        registry.publish_version(job_id, fitted.pipeline, metadata.to_json())
    except TrainingCancelledError:
        if record_stop or not stopped():
            _finish(registry, job_id, "cancelled", None)
    except NotFoundError as exc:
        detail = f"{exc.detail}: it was deleted after the job was submitted"
        _finish(registry, job_id, "failed", job_problem("invalid_data", "Dataset gone", detail))
    except EnsembleError as exc:
        problem = job_problem(exc.code, exc.title, exc.detail)
        if exc.problems:
            problem["errors"] = [p.as_dict() for p in exc.problems]
        _finish(registry, job_id, "failed", problem)
    except MemoryError:
        detail = "the training process ran out of memory; use fewer or smaller estimators"
        _finish(registry, job_id, "failed", job_problem("worker_crashed", "Out of memory", detail))
    except Exception as exc:
        log.exception("job %s failed unexpectedly", job_id)
        detail = f"unexpected error while training ({type(exc).__name__}); it has been logged"
        _finish(registry, job_id, "failed", job_problem("internal", "Training failed", detail))


def _training_data(registry: Registry, document: JobDocument) -> TrainingData:
    dataset_id = document.dataset.id
    table = read_table(registry.read_dataset_parquet(dataset_id), filename=f"{dataset_id}.parquet")
    return select_training_data(table, document.target, document.features, document.task)


def _finish(registry: Registry, job_id: str, status: Any, error: dict[str, object] | None) -> None:
    with contextlib.suppress(ConflictError):  # already ended: by publish_version, or the server
        registry.finish_job(job_id, status, error)


def plain(value: Any) -> Any:
    """JSON-safe copy: numpy scalars become Python numbers, NaN and infinities None."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


def version_metadata(
    job_id: str,
    document: JobDocument,
    data: TrainingData,
    fitted: FittedModel,
    inference: dict[str, Any],
) -> VersionMetadata:
    """The version document the API serves (the registry adds sha256 and size);
    ``inference`` is the engine verdict (``ensembles.inference.inference_verdict``).

    Numpy scalars become Python numbers, and NaN or infinities None, before it is typed.
    """
    signature = fitted.signature
    training = {
        **fitted.training,
        "evaluation": document.evaluation.model_dump(mode="json"),
        "task_inferred": document.task_inferred,
    }
    fields = plain(
        {
            "task": data.task,
            "kind": fitted.spec.kind,
            "spec": fitted.spec.model_dump(mode="json", exclude_none=True),
            "dataset": document.dataset.model_dump(mode="json"),
            "target": document.target,
            "features": [{"name": f.name, "dtype": f.dtype} for f in data.features],
            "classes": None if signature.classes is None else list(signature.classes),
            "metrics": fitted.metrics.model_dump(),
            "feature_importances": fitted.feature_importances,
            "training": training,
            "artifact": {"format": "joblib", "library_versions": library_versions()},
            "description": document.description,
            "tags": document.tags,
            "job_id": job_id,
            "signature": signature.as_dict(),
            # Which engine serves the version (chosen once, here) and, if scikit-learn,
            # why the compiled one was refused: see ensembles.inference.compiling.
            "inference": inference,
        }
    )
    return VersionMetadata.model_validate(fields)
