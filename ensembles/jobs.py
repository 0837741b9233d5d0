"""A training job, from its document to a published version: one function,
:func:`run_training`, run alike by a local worker process (:mod:`app.jobs.worker`) and
by a task on a Dask cluster (:mod:`app.jobs.cluster`); they differ only in the
:class:`MemberPool` where members are fitted and in what ``stopped()`` reads.

It loads the dataset the job names, trains with a progress callback and a cancel token
(throttled registry round trips, made on a thread of their own so that training never
waits for them: :mod:`ensembles.job_updates`), chooses the engine that will serve the
model (the compiled one if it answers exactly as scikit-learn), publishes the version and
records the job's outcome: its version, or why it failed, as a problem with a stable code.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import platform
from collections.abc import Callable, Sequence
from importlib import metadata as importlib_metadata
from typing import Any

from sklearn.base import BaseEstimator

from ensembles.catalog import Kind, Task, kind_of
from ensembles.data import TrainingData, read_table, select_training_data
from ensembles.engine_verdict import EngineVerdict
from ensembles.errors import (
    ConflictError,
    EnsembleError,
    NotFoundError,
    TrainingCancelledError,
)
from ensembles.job_updates import JobUpdates
from ensembles.parallel import MemberPool
from ensembles.registry import Registry, job_problem
from ensembles.registry.documents import JobDocument, VersionMetadata
from ensembles.stored_labels import read_labels_source
from ensembles.stored_tables import read_stored_table
from ensembles.training import FittedModel, train
from ensembles.training_data import Labels, select_labels

log = logging.getLogger(__name__)

_LIBRARIES = ("scikit-learn", "numpy", "scipy", "pandas", "joblib")


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
    try:
        with JobUpdates(registry, job_id, stopped) as updates:
            train_and_publish(registry, job_id, JobDocument.of(job), pool, updates)
    except TrainingCancelledError:
        if record_stop or not stopped():
            _finish(registry, job_id, "cancelled", None)
    except Exception as exc:
        _finish(registry, job_id, "failed", _failure(job_id, exc))


def train_and_publish(
    registry: Registry, job_id: str, document: JobDocument, pool: MemberPool, updates: JobUpdates
) -> None:
    """Train the job's document on its dataset and publish the version (the job ends
    with it); TrainingCancelledError when ``updates`` reads the job cancelled."""
    data = load_training_data(
        registry, document.dataset.id, document.target, document.features, document.task
    )
    progress, cancel = updates.progress, updates
    # Compiled and checked beside the measuring, calibrated after it: see engine_verdict.
    verdict = EngineVerdict(data.task, document.random_state, pool.task_threads, cancel)
    fitted = train(
        data,
        document.ensemble,
        document.evaluation,
        document.random_state,
        on_progress=progress,
        cancel=cancel,
        pool=pool,
        on_fitted=verdict.start,
        on_explaining=verdict.explaining,
        on_answers=verdict.answered,
        on_measuring=verdict.measuring,
    )
    if cancel.is_set():
        raise TrainingCancelledError("training was cancelled")
    progress(0, 1, "compiling")
    inference = verdict.result()
    metadata = version_metadata(job_id, document, data, fitted, inference)
    updates.close()  # no write of its may follow the version's (publishing ends the job)
    registry.publish_version(job_id, fitted.pipeline, metadata.to_json())


def _failure(job_id: str, exc: Exception) -> dict[str, object]:
    """The job's problem for what ended its training."""
    if isinstance(exc, NotFoundError):
        detail = f"{exc.detail}: it was deleted after the job was submitted"
        return job_problem("invalid_data", "Dataset gone", detail)
    if isinstance(exc, EnsembleError):
        problem = job_problem(exc.code, exc.title, exc.detail)
        if exc.problems:
            problem["errors"] = [p.as_dict() for p in exc.problems]
        return problem
    if isinstance(exc, MemoryError):
        detail = "the training process ran out of memory; use fewer or smaller estimators"
        return job_problem("worker_crashed", "Out of memory", detail)
    log.exception("job %s failed unexpectedly", job_id)  # called while handling ``exc``
    detail = f"unexpected error while training ({type(exc).__name__}); it has been logged"
    return job_problem("internal", "Training failed", detail)


def load_training_data(
    registry: Registry,
    dataset_id: str,
    target: str,
    features: Sequence[str] | None,
    task: Task | None,
) -> TrainingData:
    """The stored dataset (verified bytes) as the training data of a job: the check at
    submit and the training read it alike. DataError naming the columns that do not fit.

    The table's column summaries are its record's when the file's footer agrees with
    them (:mod:`ensembles.stored_tables`), else the whole read computes them again."""
    record = registry.get_dataset(dataset_id)
    parquet = registry.read_dataset_parquet(dataset_id, record)
    table = read_stored_table(parquet, record.columns)
    if table is None:
        table = read_table(parquet, filename=f"{dataset_id}.parquet")
    return select_training_data(table, target, features, task)


def load_labels(
    registry: Registry,
    dataset_id: str,
    target: str,
    features: Sequence[str] | None,
    task: Task | None,
) -> Labels:
    """What :func:`load_training_data` decides, with the same problems, from the columns'
    dtypes and the target column alone (the submit's check needs no feature values)."""
    parquet = registry.read_dataset_parquet(dataset_id)
    source = read_labels_source(parquet, target)
    if source is None:  # a file the footer cannot vouch for: the whole read, as training does
        table = read_table(parquet, filename=f"{dataset_id}.parquet")
        source = {c.name: c.dtype for c in table.columns}, table.frame
    dtypes, frame = source
    return select_labels(dtypes, frame, target, features, task)


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


def library_versions(pipeline: BaseEstimator | None = None) -> dict[str, str]:
    """Versions of what the artifact loads with: scikit-learn's stack, the third-party
    library of each kind in ``pipeline`` (xgboost, lightgbm, catboost) and the
    distributions a kind names (``Kind.libraries``: its own class is in the artifact)."""
    versions = {"python": platform.python_version()}
    for name in (*_LIBRARIES, *_kind_libraries(pipeline)):
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    for module in _library_modules(pipeline):
        # By module: xgboost installs as the xgboost-cpu distribution, or as xgboost.
        versions[module] = str(importlib.import_module(module).__version__)
    return versions


def _pipeline_parts(pipeline: BaseEstimator | None) -> list[tuple[object, Kind]]:
    """Every estimator in ``pipeline``, at every level of nesting, with its kind."""
    if pipeline is None:
        return []
    parts = [pipeline, *pipeline.get_params(deep=True).values()]
    kinds = [(p, kind_of(p)) for p in parts]  # CatBoost's classes are not BaseEstimators
    return [(part, kind) for part, kind in kinds if kind is not None]


def _pipeline_kinds(pipeline: BaseEstimator | None) -> list[Kind]:
    """The kind of every estimator in ``pipeline``, at every level of nesting."""
    return [kind for _, kind in _pipeline_parts(pipeline)]


def _kind_libraries(pipeline: BaseEstimator | None) -> list[str]:
    """The ``libraries`` of every kind whose class in ``pipeline`` is this package's own
    (XGBoost's regressor is the library's class, its classifier the service's)."""
    return sorted(
        {
            name
            for part, kind in _pipeline_parts(pipeline)
            if type(part).__module__.startswith("ensembles.")
            for name in kind.libraries
        }
    )


def _library_modules(pipeline: BaseEstimator | None) -> list[str]:
    """The third-party library modules of the kinds in ``pipeline``."""
    kinds = _pipeline_kinds(pipeline)
    return sorted({kind.library.module for kind in kinds if kind.library is not None})


def version_metadata(
    job_id: str,
    document: JobDocument,
    data: TrainingData,
    fitted: FittedModel,
    inference: dict[str, Any],
) -> VersionMetadata:
    """The version document the API serves (the registry adds sha256 and size);
    ``inference`` is the engine verdict (``ensembles.inference.inference_verdict``, as
    :mod:`ensembles.engine_verdict` works it out).

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
            "artifact": {
                "format": "joblib",
                "library_versions": library_versions(fitted.pipeline),
            },
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
