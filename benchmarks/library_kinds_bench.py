"""Training a boosting-library kind: the service's training function against the library.

A LightGBM (or XGBoost, or CatBoost) classifier of ``--rounds`` rounds (default 500) on a generated
table (default 200,000 rows x 20 features, two classes), timed two ways, each
``--repeat`` times, with the same threads:

* **service**: :func:`ensembles.training.train` as a job's worker calls it (no hold-out,
  no cross-validation: the fit, its per-round callbacks, the scores on the training
  rows, the staged curve, the importances);
* **direct**: the library's estimator with the same parameters fitted in this process
  on the same rows (already preprocessed: all columns are numeric).

The ratio service / direct is printed (issue 22's goal: at most 1.15).  Timings on a
shared machine are noisy: compare within one run.

    PYTHONPATH=. .venv/bin/python benchmarks/library_kinds_bench.py [--kind lightgbm]
        [--rows N] [--features N] [--rounds N] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd
from sklearn.datasets import make_classification

from ensembles.catalog import KINDS
from ensembles.data import select_training_data, table_from_frame
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble

SEED = 0


def _frame(rows: int, features: int) -> pd.DataFrame:
    X, y = make_classification(
        n_samples=rows, n_features=features, n_informative=features // 2, random_state=SEED
    )
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(features)])
    frame["target"] = y
    return frame


def _direct(kind: str, params: dict[str, Any], threads: int, X: Any, y: Any) -> float:
    entry = KINDS[kind]
    cls = entry.classes["classification"]
    own = entry.estimator_params("classification", params) if entry.estimator_params else params
    # CatBoost keeps the job's threads (threads_param None): its thread_count.
    threads_name = entry.threads_param or "thread_count"
    model = cls(**{**entry.fixed, **own, "random_state": SEED, threads_name: threads})
    started = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="lightgbm", choices=["lightgbm", "xgboost", "catboost"])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    frame = _frame(args.rows, args.features)
    data = select_training_data(table_from_frame(frame), "target", task="classification")
    raw = {"kind": args.kind, "params": {KINDS[args.kind].size_param: args.rounds}}
    spec = resolve_ensemble(parse_estimator_spec(raw), "classification")
    evaluation = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
    pool = MemberPool.local()
    X, y = np.asarray(data.X, dtype=float), np.asarray(data.y)
    service, direct = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        train(data, spec, evaluation, SEED, pool=pool)
        service.append(time.perf_counter() - started)
        direct.append(_direct(args.kind, dict(spec.params), pool.threads, X, y))
        print(f"service {service[-1]:.2f} s, direct {direct[-1]:.2f} s", flush=True)
    s, d = statistics.median(service), statistics.median(direct)
    print(
        f"{args.kind}, {args.rounds} rounds, {args.rows:,} x {args.features}, "
        f"{pool.threads} threads: service {s:.2f} s, direct {d:.2f} s, ratio {s / d:.2f} "
        f"(median of {args.repeat})"
    )


if __name__ == "__main__":
    main()
