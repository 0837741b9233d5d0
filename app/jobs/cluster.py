"""Training jobs on a Dask cluster (``ENSEMBLE_DASK_SCHEDULER=tcp://host:8786``).

:class:`DaskExecutor` is the job runner's second executor (:mod:`app.jobs.executors`):
each job becomes one task, :func:`ensembles.job_tasks.train_on_cluster`, which a Dask
worker runs exactly as a local worker process would (:func:`ensembles.jobs.run_training`:
the same registry, dataset, progress, cancel token and publication of the version), with
one difference: the members of forests and the bagging family (and of voting, stacking,
their CV folds) are fitted across the cluster's workers, through joblib's Dask backend on
the worker's own client (``distributed.get_client()``; joblib secedes the task while it
waits, so its worker's thread serves members meanwhile).  The model is the one a local
fit gives.

The Dask workers run the service's image; the task needs ``ensembles`` only. They
reach the registry database and the artifact store the service uses
(``ENSEMBLE_DATA_DIR`` on a shared folder, or the database and object store of a
scale-out deployment); their nannies start them with one BLAS thread.

The runner's life cycle maps onto the cluster so:

* **progress and cancel** go through the registry, as for local jobs; a cancel aborts
  the fit at once (:mod:`ensembles.parallel`), members still running finish on their
  worker and are dropped;
* **stop** (timeout, a cancel not heeded in time, shutdown): a Dask ``Event`` named after
  the job, which the task reads every ``STOP_POLL_S``; it then stops without recording
  anything (the runner records why), and if it does not end within the runner's grace,
  its future is cancelled;
* **a dying worker fails that job only**: Dask would run a task whose worker died again
  elsewhere; the task knows it is such a second attempt (a second ``Event`` set by the
  first) and fails the job with a clear problem instead of training it twice.  A worker
  that dies while fitting members only costs those members: Dask fits them again
  elsewhere, with the same seeds, so the job succeeds with the same model.

The scheduler is reached at start (the launcher exits 2 naming the setting when it is
not) and watched afterwards: ``/readyz`` answers 503 naming ``ENSEMBLE_DASK_SCHEDULER``
while the client has lost it, and the executor connects again once it is back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from ensembles.job_tasks import WorkerConfig, train_on_cluster

log = logging.getLogger("app.cluster")  # its name before app/jobs/ (log filters)

SETTING: Final = "ENSEMBLE_DASK_SCHEDULER"
CONNECT_TIMEOUT_S: Final = 5.0
RECONNECT_EVERY_S: Final = 5.0
_ENDED: Final = ("finished", "error", "cancelled", "lost")


class SchedulerUnreachableError(RuntimeError):
    """The Dask scheduler of ENSEMBLE_DASK_SCHEDULER cannot be reached."""


def connect(address: str, timeout: float = CONNECT_TIMEOUT_S) -> Any:
    """A ``distributed.Client`` on ``address`` (blocking: call it outside an event loop),
    or SchedulerUnreachableError naming the setting."""
    from distributed import Client

    try:
        return Client(address, timeout=f"{timeout}s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise SchedulerUnreachableError(
            f"{SETTING}={address}: the Dask scheduler is unreachable ({type(exc).__name__}: {exc})"
        ) from None


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """None when the scheduler answers, else why not (for the launcher's exit 2)."""
    try:
        client = connect(address, timeout)
    except SchedulerUnreachableError as exc:
        return str(exc)
    client.close()
    return None


def _events(job_id: str) -> tuple[str, str]:
    return f"ensemble-stop-{job_id}", f"ensemble-started-{job_id}"


# --------------------------------------------------------------- the service's side


def _background(action: Callable[[], object], name: str) -> None:
    """Run a blocking call to the cluster without holding up the event loop."""

    def run() -> None:
        try:
            action()
        except Exception:
            log.warning("%s failed", name, exc_info=True)

    threading.Thread(target=run, name=name, daemon=True).start()


class DaskExecutor:
    """Training jobs as tasks on the cluster of ``address``."""

    def __init__(self, address: str, client: Any) -> None:
        self.address = address
        self._client = client
        self._lock = threading.Lock()
        self._reconnecting = False
        self._last_try = time.monotonic()

    @classmethod
    def open(cls, address: str) -> DaskExecutor:
        """Connect (blocking); SchedulerUnreachableError naming the setting."""
        return cls(address, connect(address))

    @property
    def client(self) -> Any:
        return self._client

    def warm_up(self) -> None:
        return None

    def start(self, config: WorkerConfig) -> DaskExecution:
        client = self._client
        if client.status != "running":
            raise SchedulerUnreachableError(f"{SETTING}={self.address}: {self._state()}")
        from distributed import Event, get_client

        stop_name, started_name = _events(config.job_id)
        future = client.submit(
            train_on_cluster,
            config,
            Event(stop_name, client=client),
            Event(started_name, client=client),
            get_client,  # on the worker: its own client
            key=f"ensemble-train-{config.job_id}",
            pure=False,
        )
        return DaskExecution(client, config.job_id, future)

    def readiness(self) -> str:
        status = self._client.status
        if status == "running":
            return "ok"
        if status in ("closed", "failed"):
            self._reconnect_soon()
        return f"{SETTING}={self.address}: {self._state()}"

    def _state(self) -> str:
        return f"the Dask scheduler is unreachable (client {self._client.status})"

    def _reconnect_soon(self) -> None:
        now = time.monotonic()
        with self._lock:
            if self._reconnecting or now - self._last_try < RECONNECT_EVERY_S:
                return
            self._reconnecting, self._last_try = True, now

        def reconnect() -> None:
            try:
                client = connect(self.address)
            except SchedulerUnreachableError as exc:
                log.warning("%s", exc)
            else:
                old, self._client = self._client, client
                log.info("connected again to the Dask scheduler %s", self.address)
                _background(old.close, "dask-client-close")
            finally:
                with self._lock:
                    self._reconnecting = False

        _background(reconnect, "dask-reconnect")

    def close(self) -> None:
        self._client.close()


class DaskExecution:
    """One job's task on the cluster."""

    def __init__(self, client: Any, job_id: str, future: Any) -> None:
        self.client, self.job_id, self.future = client, job_id, future
        self._killed = False
        self._death = "the Dask task of this job ended without recording a result"

    @property
    def pid(self) -> int | None:
        """The process id of the Dask worker running the job (blocking: asks the cluster)."""
        for address, keys in self.client.processing().items():
            if self.future.key in keys:
                pids: dict[str, int] = self.client.run(os.getpid, workers=[address])
                return pids.get(address)
        return None

    def ended(self) -> bool:
        return self._killed or self.future.status in _ENDED

    def terminate(self) -> None:
        from distributed import Event

        stop_name, _ = _events(self.job_id)
        _background(lambda: Event(stop_name, client=self.client).set(), "dask-stop")

    def kill(self) -> None:
        self._killed = True
        self._death = "the Dask task of this job did not stop when asked and was cancelled"
        _background(lambda: self.client.cancel([self.future], force=True), "dask-cancel")

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ended() and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        """Blocking: reads why the task failed, then releases it and the job's events."""
        from distributed import Event

        status = self.future.status
        if status == "error":
            try:
                error = self.future.exception(timeout=CONNECT_TIMEOUT_S)
            except Exception as exc:  # the scheduler went away meanwhile
                error = exc
            name = type(error).__name__
            if name == "KilledWorker":
                self._death = f"the Dask workers running this job died ({name}: {error})"
            else:
                self._death = f"the Dask task of this job failed ({name}: {error})"
        elif status in ("cancelled", "lost") and not self._killed:
            self._death = (
                f"the Dask cluster lost the task of this job ({status}): its worker died "
                "or the scheduler was restarted"
            )
        self.future.release()
        for name in _events(self.job_id):
            try:
                Event(name, client=self.client).clear()
            except Exception:  # the scheduler is away: events die with it
                log.debug("could not clear the event %s", name, exc_info=True)

    def death(self) -> str:
        return self._death
