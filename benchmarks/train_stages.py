"""Where a training's time goes after the fit, in process: one line of JSON per run.

A direct fit (``RandomForestClassifier(n_jobs=-1, oob_score=True)``, or LightGBM with a
thread per CPU), then :func:`ensembles.training.train` on the same generated rows (no
hold-out, no cross-validation) with the time of each stage: the fit, the figures after it
without the explanation summary, the explanation summary, the compiled engine's verdict
and the artifact's dump; ``metrics_sha`` fingerprints the metrics, so two commits' runs
show whether a change moved a figure.  Run two commits alternately on a shared machine
and compare the stages, not the totals:

    PYTHONPATH=. .venv/bin/python benchmarks/train_stages.py random_forest 50000 100
    PYTHONPATH=. .venv/bin/python benchmarks/train_stages.py lightgbm 200000 500
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

import joblib
from sklearn.ensemble import RandomForestClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_scale import LEAF, table

from ensembles.data import select_training_data, table_from_frame
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


def main() -> None:
    kind, rows, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    preload()  # as the service's fork server does
    frame = table(rows, 20)
    direct = _direct(kind, frame, size)
    data = select_training_data(table_from_frame(frame), "target", task="classification")
    params = {"n_estimators": size} | (
        {"min_samples_leaf": LEAF} if kind == "random_forest" else {}
    )
    spec = resolve_ensemble(parse_estimator_spec({"kind": kind, "params": params}), data.task)
    stamps: dict[str, float] = {}
    started = time.perf_counter()
    fitted = train(
        data,
        spec,
        EvaluationSpec(holdout_fraction=0.0, cv_folds=0),
        0,
        pool=MemberPool.local(),
        on_progress=lambda _d, _t, stage: stamps.setdefault(stage, time.perf_counter()),
    )
    trained = time.perf_counter()
    inference_verdict(fitted.pipeline, data.task, fitted.train_rows, 0)
    verdict = time.perf_counter()
    joblib.dump(fitted.pipeline, io.BytesIO())
    dumped = time.perf_counter()
    explained = float(fitted.training.get("explanations_s", 0.0))
    figures = json.dumps(fitted.metrics.model_dump(), sort_keys=True, default=str)
    print(
        json.dumps(
            {
                "direct": round(direct, 2),
                "fit": round(stamps["evaluating"] - stamps.get("fitting", started), 2),
                "after_fit_no_expl": round(trained - stamps["evaluating"] - explained, 2),
                "explanations": explained,
                "explained_rows": (fitted.metrics.explanations or {}).get("rows"),
                "verdict": round(verdict - trained, 2),
                "dump": round(dumped - verdict, 2),
                "metrics_sha": hashlib.sha256(figures.encode()).hexdigest()[:12],
            }
        )
    )


if __name__ == "__main__":
    main()
