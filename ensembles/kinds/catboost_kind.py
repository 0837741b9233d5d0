"""CatBoost as a kind: how the spec becomes a ``CatBoostClassifier`` / ``CatBoostRegressor``
(its loss parameters written into ``loss_function`` as CatBoost wants them), how its
rounds are fitted (progress, cancel and early stopping through a callback passed to
``fit`` only) and its staged answers.  Imports catboost only when called.
"""

from __future__ import annotations

from typing import Any

from ensembles.kinds.base import OwnReport
from ensembles.kinds.boosting_library import (
    FIT_PARAMS,
    Round,
    RoundFit,
    fit_report,
    validation_split,
)
from ensembles.tasks import Task

__all__ = ["estimator_params", "fit_rounds", "predict_at", "rounds_kept"]

LOSS_PARAMS = {"Huber": "delta", "Quantile": "alpha"}


def estimator_params(task: Task, params: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in params.items() if k not in FIT_PARAMS and k not in ("delta", "alpha")}
    loss = out.pop("loss_function", None)
    if loss is not None:
        name = LOSS_PARAMS.get(loss)
        out["loss_function"] = f"{loss}:{name}={params[name]!r}" if name else loss
    return out


class _Rounds:
    """CatBoost's callback protocol: ``after_iteration`` returning False stops the fit."""

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
) -> OwnReport:
    size = int(estimator.get_params()["iterations"])
    fit = validation_split(estimator, X, y, params, size, on_round)
    extra: dict[str, Any] = {"callbacks": [_Rounds(fit)]}
    if fit.patience is not None:
        extra |= {"eval_set": (fit.X_valid, fit.y_valid), "early_stopping_rounds": fit.patience}
    estimator.set_params(thread_count=threads)  # a fitted CatBoost model cannot change it
    estimator.fit(fit.X, fit.y, **extra)
    best = int(estimator.get_best_iteration()) + 1 if fit.patience is not None else None
    return fit_report(size, int(estimator.tree_count_), best, fit)


def rounds_kept(estimator: Any) -> int:
    return int(estimator.tree_count_)


def predict_at(estimator: Any, X: Any, rounds: int) -> Any:
    return estimator.predict(X, ntree_end=rounds)
