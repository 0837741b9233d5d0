"""Where a training's time goes after the fit, in process: one line of JSON per run.

A direct fit (``RandomForestClassifier(n_jobs=-1, oob_score=True)``, or LightGBM with a
thread per CPU), then :func:`ensembles.training.train` on the same generated rows (no
hold-out, no cross-validation) with the time of each stage: the fit, the figures after it
without the explanation summary, the explanation summary, the compiled engine's verdict
and the artifact's dump; ``metrics_sha`` fingerprints the metrics, so two commits' runs
show whether a change moved a figure.  Run two commits alternately on a shared machine
and compare the stages, not the totals:

    PYTHONPATH=. .venv/bin/python benchmarks/train_stages.py random_forest 50000 100
    PYTHONPATH=. .venv/bin/python benchmarks/train_stages.py lightgbm 200000 500 [--job]

The stages above run one after the other; the verdict is timed alone, with GTIL on one
thread, after ``train()``.  A job does not run them so: it checks the compiled engine on a
thread of its own beside the figures, with GTIL on the job's threads, and calibrates after
``train()`` (:mod:`ensembles.engine_verdict`).  ``--job`` runs them the job's way and adds
what the critical path after the fit costs there: ``check_done`` (when the check's thread
ended, from the fit's end), ``calibration``, ``after_fit`` (the fit's end to the dumped
artifact, wall) and ``after_fit_cpu`` (the process's CPU over the same span, every thread:
up to twice ``after_fit`` on two cores; the gap is a core left idle or lent to other
work), with the 1-minute load average at the end.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import resource
import sys
import time
from pathlib import Path

import joblib
from sklearn.ensemble import RandomForestClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_scale import LEAF, table

from ensembles.data import select_training_data, table_from_frame
from ensembles.engine_verdict import EngineVerdict
from ensembles.explain.trees import preload
from ensembles.inference import inference_verdict
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble


def _direct(kind: str, frame: object, size: int) -> float:
    X = frame.drop(columns="target")  # type: ignore[attr-defined]
    y = frame["target"].to_numpy()  # type: ignore[index]
    started = time.perf_counter()
    if kind == "random_forest":
        forest = RandomForestClassifier(
            n_estimators=size, min_samples_leaf=LEAF, oob_score=True, n_jobs=-1, random_state=0
        )
        forest.fit(X.to_numpy(), y)
    else:
        import lightgbm

        lightgbm.LGBMClassifier(
            n_estimators=size, random_state=0, n_jobs=os.cpu_count(), verbose=-1
        ).fit(X, y)
    return time.perf_counter() - started


def _cpu() -> float:
    """The process's CPU seconds so far, every thread."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def main() -> None:
    kind, rows, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    as_job = "--job" in sys.argv[4:]
    preload()  # as the service's fork server does
    frame = table(rows, 20)
    direct = _direct(kind, frame, size)
    data = select_training_data(table_from_frame(frame), "target", task="classification")
    params = {"n_estimators": size} | (
        {"min_samples_leaf": LEAF} if kind == "random_forest" else {}
    )
    spec = resolve_ensemble(parse_estimator_spec({"kind": kind, "params": params}), data.task)
    stamps: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def on_progress(_done: int, _total: int, stage: str) -> None:
        if stage not in stamps:
            stamps[stage] = time.perf_counter()
            cpu[stage] = _cpu()

    pool = MemberPool.local()
    verdict = EngineVerdict(
        data.task,
        0,
        pool.task_threads,
        on_checked=lambda: stamps.setdefault("checked", time.perf_counter()),
    )
    started = time.perf_counter()
    fitted = train(
        data,
        spec,
        EvaluationSpec(holdout_fraction=0.0, cv_folds=0),
        0,
        pool=pool,
        on_progress=on_progress,
        on_fitted=verdict.start if as_job else None,
        on_explaining=verdict.explaining if as_job else None,
        on_answers=verdict.answered if as_job else None,
        on_measuring=verdict.measuring if as_job else None,
    )
    trained = time.perf_counter()
    if as_job:
        inference = verdict.result()
    else:
        inference = inference_verdict(fitted.pipeline, data.task, fitted.train_rows, 0)
    verdicted = time.perf_counter()
    joblib.dump(fitted.pipeline, io.BytesIO())
    dumped = time.perf_counter()
    explained = float(fitted.training.get("explanations_s", 0.0))
    figures = json.dumps(fitted.metrics.model_dump(), sort_keys=True, default=str)
    evaluating = stamps["evaluating"]
    line: dict[str, object] = {
        "direct": round(direct, 2),
        "fit": round(evaluating - stamps.get("fitting", started), 2),
        "after_fit_no_expl": round(trained - evaluating - explained, 2),
        "explanations": explained,
        "explained_rows": (fitted.metrics.explanations or {}).get("rows"),
    }
    if as_job:
        line |= {
            "check_done": round(stamps["checked"] - evaluating, 2),
            "calibration": round(verdicted - trained, 2),
            "dump": round(dumped - verdicted, 2),
            "after_fit": round(dumped - evaluating, 2),
            "after_fit_cpu": round(_cpu() - cpu["evaluating"], 2),
            "load": round(os.getloadavg()[0], 1),
        }
    else:
        line |= {"verdict": round(verdicted - trained, 2), "dump": round(dumped - verdicted, 2)}
    line |= {
        "engine": inference["engine"],
        "metrics_sha": hashlib.sha256(figures.encode()).hexdigest()[:12],
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
