"""Timestamps of a training job's stages in every process of the service (benchmarks only).

Put this folder on ``PYTHONPATH`` (after the tree under test) and set
``ENSEMBLE_TIMELINE`` to a file: every Python process started with them (the launcher,
the server, the fork server, each job's worker) wraps the functions named below and
appends one JSON line per call end: ``{"pid", "what", "t0", "t1", "cpu0", "cpu1"}``
(wall time.time(); process CPU).  ``benchmarks/job_timeline.py`` reads them.  Names
missing in a tree are skipped, so two commits can be compared.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import time

_PATH = os.environ.get("ENSEMBLE_TIMELINE")

_TARGETS = (
    ("app.jobs.runner", "JobRunner", "submit"),
    ("app.jobs.runner", "JobRunner", "wait"),
    ("app.jobs.runner", "JobRunner", "_settle_exited"),
    ("app.jobs.executors", "ProcessExecutor", "start"),
    ("app.routes.jobs", None, "prepare_job"),
    ("app.services.training", None, "check_job"),
    ("ensembles.submission", None, "load_labels"),
    ("ensembles.registry.sql_jobs", "SqlJobs", "submit_job"),
    ("ensembles.registry.sql_jobs", "SqlJobs", "start_next_job"),
    ("app.jobs.worker", None, "open_registry"),
    ("app.jobs.worker", None, "run_training"),
    ("ensembles.jobs", None, "load_training_data"),
    ("ensembles.jobs", None, "train"),
    ("ensembles.jobs", None, "version_metadata"),
    ("ensembles.jobs", None, "read_table"),
    ("ensembles.jobs", None, "read_stored_table"),
    ("ensembles.jobs", None, "select_training_data"),
    ("ensembles.training", None, "_split"),
    ("ensembles.training", None, "_fit"),
    ("ensembles.training", None, "_fit_pipeline"),
    ("ensembles.training", None, "fit_rounds"),
    ("ensembles.training", None, "_measure"),
    ("ensembles.training", None, "score_fit"),
    ("ensembles.training", None, "_explanations"),
    ("ensembles.training", None, "feature_importances"),
    ("ensembles.training", None, "_metrics"),
    ("ensembles.training", None, "_signature"),
    ("ensembles.kinds.lightgbm_scores", "ScoreWatch", "answers"),
    ("ensembles.engine_verdict", "EngineVerdict", "_check"),
    ("ensembles.engine_verdict", "EngineVerdict", "wait"),
    ("ensembles.engine_verdict", "EngineVerdict", "result"),
    ("ensembles.job_updates", "JobUpdates", "close"),
    ("ensembles.registry.sql_jobs", "SqlJobs", "publish_version"),
    ("ensembles.registry.stores.artifacts", "ArtifactFolder", "write"),
    ("ensembles.registry.sql_datasets", "SqlDatasets", "read_dataset_parquet"),
    ("ensembles.registry.stores.artifacts", "ArtifactFolder", "read"),
    ("ensembles.registry.sql_jobs", "SqlJobs", "get_job"),
)


def _log(what: str, t0: float, t1: float, cpu0: float, cpu1: float) -> None:
    assert _PATH is not None
    line = {"pid": os.getpid(), "what": what, "t0": t0, "t1": t1, "cpu0": cpu0, "cpu1": cpu1}
    with open(_PATH, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _wrap(what: str, fn):  # type: ignore[no-untyped-def]
    if getattr(fn, "_timeline", False):
        return fn
    if _is_async(fn):

        @functools.wraps(fn)
        async def awrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            t0, c0 = time.time(), time.process_time()
            try:
                return await fn(*args, **kwargs)
            finally:
                _log(what, t0, time.time(), c0, time.process_time())

        awrapped._timeline = True  # type: ignore[attr-defined]
        return awrapped

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
        t0, c0 = time.time(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _log(what, t0, time.time(), c0, time.process_time())

    wrapped._timeline = True  # type: ignore[attr-defined]
    return wrapped


def _is_async(fn) -> bool:  # type: ignore[no-untyped-def]
    import inspect

    return inspect.iscoroutinefunction(fn)


def _install() -> None:
    for module_name, owner, name in _TARGETS:
        try:
            module = importlib.import_module(module_name)
        except Exception:
            continue
        holder = module if owner is None else getattr(module, owner, None)
        if holder is None or not hasattr(holder, name):
            continue
        what = f"{module_name.rsplit('.', 1)[-1]}.{owner + '.' if owner else ''}{name}"
        setattr(holder, name, _wrap(what, getattr(holder, name)))
    # The worker process's end (multiprocessing exits with os._exit after the target).
    import multiprocessing.process as mp_process

    bootstrap = mp_process.BaseProcess._bootstrap
    if not getattr(bootstrap, "_timeline", False):
        mp_process.BaseProcess._bootstrap = _wrap("process._bootstrap", bootstrap)


if _PATH:
    _install()
