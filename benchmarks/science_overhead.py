"""What the science blocks cost on top of training, and what they show.

Prints, per case, the training time and the part spent on diversity / out-of-fold scores /
hardest rows (``training.science_s``), then the bias-variance figures of bagging against
its tree and AdaBoost against its stump. Run: ``PYTHONPATH=. .venv/bin/python
benchmarks/science_overhead.py``.
"""

from __future__ import annotations

from typing import Any

from ensembles.specs import BiasVarianceSpec, EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

CASES: list[tuple[str, dict[str, Any], float]] = [
    ("breast_cancer", {"kind": "random_forest", "params": {"n_estimators": 500}}, 0.2),
    ("breast_cancer", {"kind": "random_forest", "params": {"n_estimators": 500}}, 0.0),
    ("digits", {"kind": "random_forest", "params": {"n_estimators": 500}}, 0.2),
    ("digits", {"kind": "bagging", "params": {"n_estimators": 200}}, 0.0),
    ("diabetes", {"kind": "random_forest", "params": {"n_estimators": 500}}, 0.2),
    ("digits", {"kind": "adaboost", "params": {"n_estimators": 200}}, 0.2),
    (
        "wine",
        {
            "kind": "stacking",
            "estimators": [
                {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
                {"name": "nb", "kind": "gaussian_nb"},
            ],
        },
        0.2,
    ),
]


def overhead() -> None:
    print(
        f"{'dataset':14} {'kind':14} {'hold-out':>8} {'train s':>8} {'science s':>9} {'share':>6}"
    )
    for dataset, raw, holdout in CASES:
        data = training_data(dataset)
        spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
        fitted = train(data, spec, EvaluationSpec(holdout_fraction=holdout), 0)
        total, science = fitted.training["duration_s"], fitted.training["science_s"]
        print(
            f"{dataset:14} {raw['kind']:14} {holdout:8} {total:8.2f} {science:9.3f} "
            f"{science / total:6.1%}"
        )


def bias_variance() -> None:
    print(f"\n{'dataset':14} {'kind':10} {'part':14} {'loss':>7} {'bias':>7} {'variance':>8}")
    for dataset, raw in [
        ("breast_cancer", {"kind": "bagging", "params": {"n_estimators": 50}}),
        ("breast_cancer", {"kind": "adaboost", "params": {"n_estimators": 100}}),
        ("diabetes", {"kind": "bagging", "params": {"n_estimators": 50}}),
    ]:
        data = training_data(dataset)
        spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
        evaluation = EvaluationSpec(holdout_fraction=0.3, bias_variance=BiasVarianceSpec(rounds=20))
        fitted = train(data, spec, evaluation, 0)
        block = fitted.metrics.bias_variance
        assert block is not None
        for part in ("ensemble", "single_member"):
            f = block[part]
            print(
                f"{dataset:14} {raw['kind']:10} {part:14} {f['loss']:7.4g} {f['bias']:7.4g} "
                f"{f['variance']:8.4g}"
            )
        print(f"{'':14} {'':10} (20 rounds: {fitted.training['bias_variance_s']:.1f} s)")


if __name__ == "__main__":
    overhead()
    bias_variance()
