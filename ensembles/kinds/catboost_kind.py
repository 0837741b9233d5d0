"""CatBoost as a kind: how the spec becomes a ``CatBoostClassifier`` / ``CatBoostRegressor``
(its loss parameters written into ``loss_function`` as CatBoost wants them), how its
rounds are fitted (progress, cancel and early stopping through a callback passed to
``fit`` only) and its staged answers.  Imports catboost only when called.

Categories reach it as integer codes in an object matrix (``Kind.integer_categories``):
CatBoost refuses floats and NaN among its ``cat_features``; missing and unseen categories
share the code -1, a category of its own to CatBoost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import is_classifier

from ensembles.kinds.base import OwnReport
from ensembles.kinds.boosting_library import (
    FIT_PARAMS,
    Keep,
    Round,
    RoundFit,
    fit_report,
    validation_split,
)
from ensembles.tasks import Task

__all__ = ["categorical_params", "estimator_params", "fit_rounds", "predict_at", "rounds_kept"]

# The loss functions with a parameter of their own, and its name (CatBoost: "Huber:delta=1").
LOSS_PARAMS = {"Huber": "delta", "Quantile": "alpha"}


def estimator_params(task: Task, params: dict[str, Any]) -> dict[str, Any]:
    # One thread unless the service fits it itself (then the job's threads): as a member,
    # its ensemble fits members in parallel, as with scikit-learn's kinds.
    out = {k: v for k, v in params.items() if k not in FIT_PARAMS | set(LOSS_PARAMS.values())}
    out["thread_count"] = 1
    # Null: left unset, CatBoost's choice (learning_rate or l2_leaf_reg set turns off its
    # automatic learning rate).
    for name in ("loss_function", "learning_rate", "l2_leaf_reg"):
        if out.get(name) is None:
            out.pop(name, None)
    loss = out.get("loss_function")
    if loss in LOSS_PARAMS:
        name = LOSS_PARAMS[loss]
        out["loss_function"] = f"{loss}:{name}={float(params[name])!r}"
    return out


def categorical_params(positions: list[int], n: int) -> dict[str, Any]:
    return {"cat_features": positions}


class _Rounds:
    """CatBoost's callback protocol: ``after_iteration`` returning False stops the fit
    (the caller then raises the cancellation)."""

    def __init__(self, fit: RoundFit) -> None:
        self.fit = fit

    def after_iteration(self, info: Any) -> bool:
        return not self.fit.round_done(int(info.iteration))


def fit_rounds(
    estimator: Any,
    X: Any,
    y: Any,
    params: dict[str, Any],
    threads: int,
    on_round: Round | None,
    keep: Keep | None = None,
) -> OwnReport:
    """``keep`` is not read: the figures ask the fitted model."""
    size = int(estimator.get_params().get("iterations", 1000))
    fit = validation_split(estimator, X, y, params, size, on_round)
    extra: dict[str, Any] = {"callbacks": [_Rounds(fit)]}
    if fit.patience is not None:
        extra |= {"eval_set": (fit.X_valid, fit.y_valid), "early_stopping_rounds": fit.patience}
    estimator.set_params(thread_count=threads)  # kept: a fitted model refuses set_params
    estimator.fit(fit.X, fit.y, **extra)
    best = int(estimator.get_best_iteration()) + 1 if fit.patience is not None else None
    return fit_report(size, int(estimator.tree_count_), best, fit)


def rounds_kept(estimator: Any) -> int:
    """The rounds the model predicts with (only its best ones under early stopping)."""
    return int(estimator.tree_count_)


def predict_at(estimator: Any, X: Any, marks: list[int]) -> list[Any]:
    """Its answers after each number of rounds in ``marks``, from CatBoost's own staged
    prediction (which adds each round to the last: every tree evaluated once).  A
    classifier's label is the first maximum of its probabilities (its multiclass
    ``predict`` answers a column, not a vector)."""
    classifier = is_classifier(estimator)
    stages = (estimator.staged_predict_proba if classifier else estimator.staged_predict)(
        X, ntree_end=marks[-1], eval_period=1
    )
    wanted, out = set(marks), []
    for k, answer in enumerate(stages, start=1):
        if k in wanted and classifier:
            out.append(np.asarray(estimator.classes_).take(np.argmax(answer, axis=1)))
        elif k in wanted:
            out.append(answer)
    return out
