"""A forest's time after the fit, in process, the fit replayed from a cache: one JSON line.

``train_stages.py random_forest 200000 100 --job`` spends ~2 minutes on a direct fit and
the service's fit before the ~5 s it reports on; this runs the same ``train()`` and engine
verdict (the job's way: the check beside, calibration after) with the forest's fit
replaced by the fitted forest from ``--cache`` (written by the first run, which fits it:
the same seed, so the same forest, the same figures).  ~10 s a run: run two trees in
turns and compare the stages (``after_fit``: the fit's end to the dumped artifact):

    PYTHONPATH=<tree> .venv/bin/python <tree>/benchmarks/after_fit_replay.py [--cache PATH]

``walked``: trees whose leaves the members' pass read from the walks beside the summary
(:mod:`ensembles.leaf_walks`; absent on trees without them).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import io
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import joblib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_scale import LEAF, table

from ensembles import forest_oob, training
from ensembles.data import select_training_data, table_from_frame
from ensembles.engine_verdict import EngineVerdict
from ensembles.explain.trees import preload
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble


def _replayed(cache: Path) -> None:
    """``training._fit_members`` from ``cache`` when it is there, else fitted and cached."""
    fit_members = training._fit_members

    def replay(ensemble: Any, kind: Any, Xt: Any, y: Any, total: int, run: Any) -> None:
        if not cache.exists():
            fit_members(ensemble, kind, Xt, y, total, run)
            joblib.dump(ensemble, cache)
            return
        own_oob = kind.oob == "forest" and bool(ensemble.get_params().get("bootstrap"))
        forest_oob.fit_without_oob(ensemble, own_oob)
        ensemble.__dict__.update(joblib.load(cache).__dict__)
        run.report(total, total, "fitting")

    training._fit_members = replay  # type: ignore[assignment]


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default="/tmp/after_fit_replay_200k_100.joblib")
    _replayed(Path(parser.parse_args().cache))
    preload()
    frame = table(200_000, 20)
    data = select_training_data(table_from_frame(frame), "target", task="classification")
    params = {"n_estimators": 100, "min_samples_leaf": LEAF}
    raw = {"kind": "random_forest", "params": params}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    stamps: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def on_progress(_done: int, _total: int, stage: str) -> None:
        if stage not in stamps:
            stamps[stage], cpu[stage] = time.perf_counter(), _cpu()

    pool = MemberPool.local()
    verdict = EngineVerdict(
        data.task,
        0,
        pool.task_threads,
        on_checked=lambda: stamps.setdefault("checked", time.perf_counter()),
    )
    hooks: dict[str, Any] = {
        "on_fitted": verdict.start,
        "on_explaining": verdict.explaining,
        "on_answers": verdict.answered,
    }
    if "on_measuring" in inspect.signature(train).parameters:  # trees before fit15: none
        hooks["on_measuring"] = verdict.measuring
    evaluation = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
    fitted = train(data, spec, evaluation, 0, pool=pool, on_progress=on_progress, **hooks)
    trained = time.perf_counter()
    inference = verdict.result()
    verdicted = time.perf_counter()
    joblib.dump(fitted.pipeline, io.BytesIO())
    dumped = time.perf_counter()
    explained = float(fitted.training.get("explanations_s", 0.0))
    figures = json.dumps(fitted.metrics.model_dump(), sort_keys=True, default=str)
    evaluating = stamps["evaluating"]
    line = {
        "tree": os.environ.get("PYTHONPATH", ""),
        "after_fit_no_expl": round(trained - evaluating - explained, 2),
        "explanations": explained,
        "check_done": round(stamps["checked"] - evaluating, 2),
        "calibration": round(verdicted - trained, 2),
        "dump": round(dumped - verdicted, 2),
        "after_fit": round(dumped - evaluating, 2),
        "after_fit_cpu": round(_cpu() - cpu["evaluating"], 2),
        "load": round(os.getloadavg()[0], 1),
        "walked": fitted.training.get("walked_ahead"),
        "engine": inference["engine"],
        "metrics_sha": hashlib.sha256(figures.encode()).hexdigest()[:12],
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
