"""LightGBM as a kind: how the spec becomes an ``LGBMClassifier`` / ``LGBMRegressor``, how
its rounds are fitted (progress, cancel and early stopping through its callbacks) and its
staged answers.  Imports lightgbm only when called: the catalog lists the kind without it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ensembles.kinds.base import OwnReport
from ensembles.kinds.boosting_library import (
    FIT_PARAMS,
    Keep,
    Round,
    check_cancel,
    fit_report,
    validation_split,
)
from ensembles.tasks import Task

__all__ = ["categorical_params", "estimator_params", "fit_rounds", "predict_at", "rounds_kept"]

# The service's names of LightGBM's regression objectives (API.md) -> LightGBM's own.
OBJECTIVES = {"l2": "regression", "l1": "regression_l1", "huber": "huber", "quantile": "quantile"}


def estimator_params(task: Task, params: dict[str, Any]) -> dict[str, Any]:
    # One thread unless the service fits it itself (then the job's threads): as a member,
    # its ensemble fits members in parallel, as with scikit-learn's kinds.
    out = {k: v for k, v in params.items() if k not in FIT_PARAMS} | {"n_jobs": 1}
    objective = out.pop("objective", None)
    if objective is not None:
        out["objective"] = OBJECTIVES.get(objective, objective)
    return out


def categorical_params(positions: list[int], n: int) -> dict[str, Any]:
    return {"categorical_feature": positions}


def fit_rounds(
    estimator: Any,
    X: Any,
    y: Any,
    params: dict[str, Any],
    threads: int,
    on_round: Round | None,
    keep: Keep | None = None,
) -> OwnReport:
    """``keep``: read the rows' answers from LightGBM's score updaters while it fits
    (:mod:`ensembles.kinds.lightgbm_scores`), when every row is fitted on in order (no
    early stopping: its validation rows are carved out and it keeps fewer rounds); its
    ``fitted`` is called once the fit has returned, before they are checked."""
    import lightgbm

    from ensembles.kinds.lightgbm_scores import ScoreWatch

    size = int(estimator.n_estimators)
    fit = validation_split(estimator, X, y, params, size, on_round)
    callbacks: list[Callable[..., None]] = [lambda env: check_cancel(fit, env.iteration + 1)]
    watch = None
    if keep is not None and fit.patience is None:
        watch = ScoreWatch(keep, len(y), _classifier(estimator))
        callbacks.append(watch)
    extra: dict[str, Any] = {}
    if fit.patience is not None:
        callbacks.append(
            lightgbm.early_stopping(fit.patience, first_metric_only=True, verbose=False)
        )
        # eval_set, not the newer eval_X/eval_y: LightGBM 4.7 encodes the classes of the
        # former only (string classes fail the latter).
        extra["eval_set"] = [(fit.X_valid, fit.y_valid)]
    estimator.set_params(n_jobs=threads)  # back to one once measured (Kind.threads_param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # eval_set's deprecation
        estimator.fit(fit.X, fit.y, callbacks=callbacks, **extra)
    if keep is not None and keep.fitted is not None:
        keep.fitted()  # the model is final: work on it starts beside the checks below
    best = int(estimator.best_iteration_) or None
    report = fit_report(size, int(estimator.n_estimators_), best, fit)
    return report if watch is None else replace(report, answers=watch.answers(estimator, X))


def _classifier(estimator: Any) -> bool:
    from sklearn.base import is_classifier

    return bool(is_classifier(estimator))


def rounds_kept(estimator: Any) -> int:
    """The rounds the model predicts with (its best under early stopping)."""
    return int(estimator.best_iteration_) or int(estimator.n_estimators_)


def predict_at(estimator: Any, X: Any, marks: list[int]) -> list[Any]:
    """Its answers after each number of rounds in ``marks``, from the raw scores of the
    rounds between marks added up: every tree is evaluated once, not once per mark.  The
    objectives the catalog allows have no link for regression; a classifier's label is
    its largest raw score (binary: raw > 0), as ``predict`` takes it from probabilities."""
    raw: Any = None
    out: list[Any] = []
    start = 0
    X = np.ascontiguousarray(X)  # once: LightGBM copies other layouts on every call
    raw_scores = _raw_scores(estimator, X)
    for k in marks:
        chunk = raw_scores(start, k - start)
        raw = chunk if raw is None else raw + chunk
        start = k
        out.append(_labels(estimator, raw))
    return out


# Rows below this are answered on one thread (OpenMP's hand-offs cost more than they give).
FEW_ROWS = 64


def _raw_scores(estimator: Any, X: Any) -> Callable[[int, int], Any]:
    """``(start, count) -> estimator.predict(X, raw_score=True, start_iteration=start,
    num_iteration=count)``.  For float64 rows the call its scikit-learn class makes
    (``booster_.predict``, the same arguments): the class's own ``predict`` first checks
    the rows and reads its parameters (``get_params``, a deep copy), 0.6-1.0 ms a call
    against 0.2 ms for the booster's, which a curve of 50 marks on a few rows pays 50
    times.  The threads split rows only: each row's sum is the same bits."""
    if X.dtype != np.float64 or X.ndim != 2:
        return lambda start, count: estimator.predict(
            X, raw_score=True, start_iteration=start, num_iteration=count
        )
    booster = estimator.booster_
    n_jobs = int(getattr(estimator, "n_jobs", None) or 0)
    threads = 1 if len(X) < FEW_ROWS else max(n_jobs, 0)
    return lambda start, count: booster.predict(
        X, raw_score=True, start_iteration=start, num_iteration=count, num_threads=threads
    )


def _labels(estimator: Any, raw: Any) -> Any:
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        return raw
    codes = (raw > 0).astype(int) if np.ndim(raw) == 1 else np.argmax(raw, axis=1)
    return np.asarray(classes).take(codes)
