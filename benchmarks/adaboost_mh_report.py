"""adaboost_mh measured: its test error and fit time next to scikit-learn's AdaBoost
(SAMME) with the same number of stump (or depth-2) members, on bundled data sets with
two to ten classes, and its training Hamming loss against the bound prod Z_t.

Each model is fitted on 75 % of the rows (stratified, seeds 0-2) and scored on the
rest; figures are means over the seeds.  One thread (the machine is shared).

    PYTHONPATH=. .venv/bin/python benchmarks/adaboost_mh_report.py [--rounds N] [--predict]

``--predict``: in-process ``predict_proba`` of one row (median of 200) and of 10,000 rows
(digits repeated) for both, fitted on digits.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn import datasets
from sklearn.ensemble import AdaBoostClassifier
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

from ensembles.kinds.adaboost_mh import AdaBoostMHClassifier

SEEDS = (0, 1, 2)
DATA: dict[str, Callable[..., Any]] = {
    "breast_cancer (2 classes)": datasets.load_breast_cancer,
    "wine (3)": datasets.load_wine,
    "digits (10)": datasets.load_digits,
}


def measure(make: Callable[[int], Any], X: Any, y: Any) -> tuple[float, float, Any]:
    errors, times, model = [], [], None
    for seed in SEEDS:
        X_tr, X_te, y_tr, y_te = train_test_split(
            X, y, test_size=0.25, stratify=y, random_state=seed
        )
        started = time.perf_counter()
        model = make(seed).fit(X_tr, y_tr)
        times.append(time.perf_counter() - started)
        errors.append(float(np.mean(model.predict(X_te) != y_te)))
    return float(np.mean(errors)), float(np.mean(times)), model


def main(rounds: int) -> None:
    print(f"{rounds} rounds; test error (mean of {len(SEEDS)} splits), fit time")
    print("| data | depth | adaboost_mh | its fit | AdaBoost (SAMME) | its fit | MH loss / bound |")
    print("|---|---|---|---|---|---|---|")
    for name, load in DATA.items():
        X, y = load(return_X_y=True)
        for depth in (1, 2):
            mh_error, mh_time, mh = measure(
                lambda _s, d=depth: AdaBoostMHClassifier(rounds, max_depth=d), X, y
            )
            sk_error, sk_time, _ = measure(
                lambda s, d=depth: AdaBoostClassifier(
                    DecisionTreeClassifier(max_depth=d), n_estimators=rounds, random_state=s
                ),
                X,
                y,
            )
            bound = float(np.prod(mh.normalizers_))
            print(
                f"| {name} | {depth} | {mh_error:.4f} | {mh_time:.2f} s | {sk_error:.4f} "
                f"| {sk_time:.2f} s | {mh.train_hamming_loss_[-1]:.4f} / {bound:.3g} |"
            )


def predict_times(rounds: int) -> None:
    X, y = datasets.load_digits(return_X_y=True)
    rows = np.tile(X, (6, 1))[:10_000]
    print("| depth | model | 1 row, p50 | 10,000 rows |")
    print("|---|---|---|---|")
    for depth in (1, 3):
        models = {
            "adaboost_mh": AdaBoostMHClassifier(rounds, max_depth=depth),
            "AdaBoost (SAMME)": AdaBoostClassifier(
                DecisionTreeClassifier(max_depth=depth), n_estimators=rounds, random_state=0
            ),
        }
        for name, model in models.items():
            model.fit(X, y)
            one = []
            for _ in range(200):
                started = time.perf_counter()
                model.predict_proba(X[:1])
                one.append(time.perf_counter() - started)
            started = time.perf_counter()
            model.predict_proba(rows)
            many = time.perf_counter() - started
            print(f"| {depth} | {name} | {1e3 * np.median(one):.2f} ms | {many:.3f} s |")


if __name__ == "__main__":
    args = sys.argv[1:]
    n_rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 100
    (predict_times if "--predict" in args else main)(n_rounds)
