"""A training job as a task: the config a worker gets, and the task a Dask worker runs.

The task is a plain function (no ``distributed`` import here): :mod:`app.jobs.cluster`
submits it with the job's two Dask ``Event`` objects and ``distributed.get_client``, all
of which unpickle on the worker, so a Dask worker needs ``ensembles`` only, not ``app``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from ensembles.errors import ConflictError
from ensembles.jobs import run_training
from ensembles.parallel import MemberPool
from ensembles.registry import JobRegistry, job_problem, open_registry
from ensembles.registry.stores import StoreConfig

log = logging.getLogger("app.cluster")  # its name before it moved here (log filters)

STOP_POLL_S: Final = 0.25
SECOND_ATTEMPT: Final = (
    "the Dask worker training this job died (or lost the scheduler) while it ran; "
    "it was not started again: submit it again"
)


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs to know; pickled to the child process or the Dask task."""

    data_dir: str
    database_url: str | None
    job_id: str
    store: StoreConfig = field(default_factory=StoreConfig)
    memory_limit_mb: int | None = None
    log_level: str = "WARNING"
    log_format: Literal["json", "text"] = "json"


class Flag(Protocol):
    """A flag shared across the cluster (a ``distributed.Event``)."""

    def is_set(self) -> bool: ...

    def set(self) -> Any: ...


def train_on_cluster(
    config: WorkerConfig, stop: Flag, started: Flag, dask_client: Callable[[], Any]
) -> None:
    """The task of one job, on a Dask worker: train, record the outcome in the registry.

    ``stop`` is read every ``STOP_POLL_S``; ``started`` tells a second attempt (its
    worker died) from the first; ``dask_client()`` is the worker's client."""
    client = dask_client()
    registry = open_registry(config.data_dir, config.database_url, config.store)
    try:
        if started.is_set():
            _fail_second_attempt(registry, config.job_id)
            return
        started.set()
        pool = MemberPool(dask_client=client)
        run_training(
            registry, config.job_id, pool, _Polled(stop.is_set, STOP_POLL_S), record_stop=False
        )
    finally:
        registry.close()


def _fail_second_attempt(registry: JobRegistry, job_id: str) -> None:
    if registry.get_job(job_id).status != "running":
        return
    problem = job_problem("worker_crashed", "Training worker died", SECOND_ATTEMPT)
    try:
        registry.finish_job(job_id, "failed", problem)
    except ConflictError:  # the runner ended it meanwhile
        return


class _Polled:
    """``read()`` at most every ``every`` seconds; true for good once it was."""

    def __init__(self, read: Callable[[], bool], every: float) -> None:
        self.read, self.every = read, every
        self.last, self.value = 0.0, False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self.value and now - self.last >= self.every:
            self.last = now
            try:
                self.value = bool(self.read())
            except Exception:  # the scheduler is away for a moment: not a stop
                log.warning("could not read the stop flag", exc_info=True)
        return self.value
