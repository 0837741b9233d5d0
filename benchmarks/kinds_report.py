"""Per-kind report: the library's training time and scores next to scikit-learn's.

For every ensemble kind, trains the library's model on a bundled dataset with a 20 %
stratified hold-out, then fits the same scikit-learn estimator (same parameters, same
seed, same training rows) directly, and prints both side by side.

    .venv/bin/python benchmarks/kinds_report.py [classification|regression]
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any

import numpy as np
from sklearn import datasets, metrics
from sklearn.model_selection import train_test_split

from ensembles import (
    EvaluationSpec,
    build_estimator,
    parse_estimator_spec,
    resolve_ensemble,
    select_training_data,
    table_from_frame,
    train,
)

SEED = 42
SPECS: dict[str, dict[str, Any]] = {
    "voting": {
        "kind": "voting",
        "params": {"voting": "soft"},
        "estimators": [
            {"name": "lr", "kind": "logistic_regression", "params": {"max_iter": 5000}},
            {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 50}},
            {"name": "nb", "kind": "gaussian_nb"},
        ],
    },
    "bagging": {"kind": "bagging", "params": {"n_estimators": 50}},
    "pasting": {"kind": "pasting", "params": {"n_estimators": 50}},
    "random_subspace": {"kind": "random_subspace", "params": {"n_estimators": 50}},
    "random_patches": {"kind": "random_patches", "params": {"n_estimators": 50}},
    "adaboost": {"kind": "adaboost", "params": {"n_estimators": 100}},
    "gradient_boosting": {
        "kind": "gradient_boosting",
        "params": {"n_estimators": 100, "subsample": 0.8},
    },
    "hist_gradient_boosting": {"kind": "hist_gradient_boosting"},
    "random_forest": {"kind": "random_forest", "params": {"n_estimators": 100}},
    "extra_trees": {"kind": "extra_trees", "params": {"n_estimators": 100, "bootstrap": True}},
    "stacking": {
        "kind": "stacking",
        "estimators": [
            {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 50}},
            {"name": "knn", "kind": "knn"},
        ],
    },
}


def _regression_spec(raw: dict[str, Any]) -> dict[str, Any]:
    if raw["kind"] in ("voting",):
        return {
            "kind": "voting",
            "estimators": [
                {"name": "ridge", "kind": "ridge"},
                {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 50}},
                {"name": "knn", "kind": "knn"},
            ],
        }
    return raw


def main(task: str) -> None:
    name = "breast_cancer" if task == "classification" else "diabetes"
    frame = getattr(datasets, f"load_{name}")(as_frame=True).frame
    data = select_training_data(table_from_frame(frame), "target")
    X, y = data.X.to_numpy(), data.y
    X_tr, X_ho, y_tr, y_ho = train_test_split(
        X, y, test_size=0.2, random_state=SEED, stratify=y if task == "classification" else None
    )
    metric = "accuracy" if task == "classification" else "r2"
    print(f"dataset {name} ({len(y)} rows, {X.shape[1]} features), hold-out 20 %, seed {SEED}")
    header = (
        f"{'kind':<24}{'ours s':>8}{'sklearn s':>10}{'ours oob':>10}{'sk oob':>9}"
        f"{'ours hold':>11}{'sk hold':>9}"
    )
    print(header)
    print("-" * len(header))
    for kind, raw in SPECS.items():
        request = raw if task == "classification" else _regression_spec(raw)
        spec = resolve_ensemble(parse_estimator_spec(request), data.task)
        t0 = time.perf_counter()
        model = train(data, spec, EvaluationSpec(holdout_fraction=0.2), SEED)
        ours_s = time.perf_counter() - t0
        direct = build_estimator(spec, data.task, SEED)
        if "oob_score" in direct.get_params() and direct.get_params().get("bootstrap"):
            direct.set_params(oob_score=True)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            direct.fit(X_tr, y_tr)
        sk_s = time.perf_counter() - t0
        pred = direct.predict(X_ho)
        sk_hold = (
            metrics.accuracy_score(y_ho, pred)
            if task == "classification"
            else metrics.r2_score(y_ho, pred)
        )
        sk_oob = getattr(direct, "oob_score_", None)
        oob = model.metrics["oob"] or {}
        ours_oob = oob.get(metric, oob.get("loss"))
        print(
            f"{kind:<24}{ours_s:>8.2f}{sk_s:>10.2f}{_fmt(ours_oob):>10}{_fmt(sk_oob):>9}"
            f"{_fmt(model.metrics['holdout'][metric]):>11}{_fmt(sk_hold):>9}"
        )


def _fmt(value: float | None) -> str:
    return (
        "-" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.4f}"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "classification")
