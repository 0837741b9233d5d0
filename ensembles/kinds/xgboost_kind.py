"""XGBoost as a kind: its classes (the classifier takes the table's own classes:
:mod:`ensembles.kinds.xgboost_labels`), how the spec becomes one, how its rounds are
fitted (progress, cancel and early stopping through a training callback that is removed
after the fit) and its staged answers.  Imports xgboost only when called.
"""

from __future__ import annotations

from typing import Any

from ensembles.kinds.base import OwnReport
from ensembles.kinds.boosting_library import (
    FIT_PARAMS,
    Keep,
    Round,
    RoundFit,
    check_cancel,
    classes_of,
    fit_report,
    positions_types,
    validation_split,
)
from ensembles.tasks import Task

__all__ = [
    "categorical_params",
    "classes",
    "estimator_params",
    "fit_rounds",
    "library_classes",
    "predict_at",
    "rounds_kept",
]

LIBRARY_CLASSES: dict[Task, str] = {"classification": "XGBClassifier", "regression": "XGBRegressor"}


def library_classes() -> dict[Task, type]:
    """The library's own classes (stand-ins when it is not installed): what versions
    stored before the classifier took the table's classes hold."""
    return classes_of("xgboost", LIBRARY_CLASSES)


def classes() -> dict[Task, type]:
    """The classes the kind builds: the classifier that takes any classes, the library's
    regressor; the library's own (stand-ins) when it is not installed."""
    try:
        from ensembles.kinds.xgboost_labels import LabelledXGBClassifier
    except ImportError:
        return library_classes()
    return library_classes() | {"classification": LabelledXGBClassifier}


def estimator_params(task: Task, params: dict[str, Any]) -> dict[str, Any]:
    # One thread unless the service fits it itself (then the job's threads): as a member,
    # its ensemble fits members in parallel, as with scikit-learn's kinds.
    out = {k: v for k, v in params.items() if k not in FIT_PARAMS} | {"n_jobs": 1}
    if out.get("objective") is None:
        out.pop("objective", None)
    alpha = out.pop("quantile_alpha", None)
    if out.get("objective") == "reg:quantileerror":
        out["quantile_alpha"] = alpha
    return out


def categorical_params(positions: list[int], n: int) -> dict[str, Any]:
    return {"enable_categorical": True, "feature_types": positions_types(positions, n)}


def _callback(fit: RoundFit) -> Any:
    import xgboost

    class Rounds(xgboost.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            check_cancel(fit, epoch + 1)
            return False

    return Rounds()


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
    size = int(estimator.n_estimators)
    fit = validation_split(estimator, X, y, params, size, on_round)
    extra: dict[str, Any] = {"verbose": False}
    if fit.patience is not None:
        extra["eval_set"] = [(fit.X_valid, fit.y_valid)]
    estimator.set_params(
        n_jobs=threads, callbacks=[_callback(fit)], early_stopping_rounds=fit.patience
    )
    try:
        estimator.fit(fit.X, fit.y, **extra)
    finally:
        # Nothing of the service stays in the artifact (its threads: Kind.threads_param).
        estimator.set_params(callbacks=None, early_stopping_rounds=None)
    fitted = int(estimator.get_booster().num_boosted_rounds())
    best = int(estimator.best_iteration) + 1 if fit.patience is not None else None
    return fit_report(size, fitted, best, fit)


def rounds_kept(estimator: Any) -> int:
    """The rounds the model predicts with (its best under early stopping)."""
    booster = estimator.get_booster()
    best = booster.attr("best_iteration")
    return int(best) + 1 if best is not None else int(booster.num_boosted_rounds())


def predict_at(estimator: Any, X: Any, marks: list[int]) -> list[Any]:
    """Its answers after each number of rounds in ``marks`` (one prediction each)."""
    return [estimator.predict(X, iteration_range=(0, k)) for k in marks]
