"""Timestamps of a training job's stages in every process of the service (benchmarks only).

Put this folder on ``PYTHONPATH`` (after the tree under test) and set
``ENSEMBLE_TIMELINE`` to a file: every Python process started with them (the launcher,
the server, the fork server, each job's worker) wraps the functions named below and
appends one JSON line per call end: ``{"pid", "what", "t0", "t1", "cpu0", "cpu1",
"rq0", "rq1", "flt0", "flt1"}`` (wall time.time(); process CPU; seconds the process's
threads had waited on a run queue, ready but not running, from
``/proc/self/task/*/schedstat``; page faults, minor and major).  A stage slower than
its CPU says was either waiting for a core (the run-queue column grows: other work on
the host) or blocked.  ``benchmarks/job_timeline.py`` reads them.  Names missing in a
tree are skipped, so two commits can be compared.
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
    ("ensembles.training", None, "_explained"),
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


def _log(
    what: str, start: tuple[float, float, float, int], end: tuple[float, float, float, int]
) -> None:
    assert _PATH is not None
    (t0, cpu0, rq0, flt0), (t1, cpu1, rq1, flt1) = start, end
    line = {"pid": os.getpid(), "what": what, "t0": t0, "t1": t1, "cpu0": cpu0, "cpu1": cpu1}
    line |= {"rq0": rq0, "rq1": rq1, "flt0": flt0, "flt1": flt1}
    with open(_PATH, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _now() -> tuple[float, float, float, int]:
    """(wall, process CPU, run-queue wait of the process's live threads, page faults)."""
    import resource

    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:  # not Linux
        tasks = []
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat", encoding="ascii") as stat:
                _WAITED[(os.getpid(), task)] = int(stat.read().split()[1])
        except OSError:  # the thread ended meanwhile: its last reading stays
            pass
    pid = os.getpid()
    waited = sum(v for (owner, _), v in _WAITED.items() if owner == pid)
    used = resource.getrusage(resource.RUSAGE_SELF)
    return time.time(), time.process_time(), waited / 1e9, used.ru_minflt + used.ru_majflt


# Each thread's last run-queue reading (ns), by (process, thread): an ended thread keeps
# its share, so the sum never falls (a floor: a thread's wait after its last reading is lost).
_WAITED: dict[tuple[int, str], int] = {}


def _wrap(what: str, fn):  # type: ignore[no-untyped-def]
    if getattr(fn, "_timeline", False):
        return fn
    if _is_async(fn):

        @functools.wraps(fn)
        async def awrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = _now()
            try:
                return await fn(*args, **kwargs)
            finally:
                _log(what, start, _now())

        awrapped._timeline = True  # type: ignore[attr-defined]
        return awrapped

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = _now()
        try:
            return fn(*args, **kwargs)
        finally:
            _log(what, start, _now())

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
