"""What the boosting-library kinds (xgboost, lightgbm) share: their classes
when the library is installed, the validation split early stopping reads, the stopping
report, and the per-round progress and cancel.

The artifact holds the library's own estimator; nothing of this service stays in it
(callbacks are passed to ``fit`` or removed after it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, is_classifier
from sklearn.model_selection import train_test_split

from ensembles.errors import TrainingCancelledError
from ensembles.kinds.base import OwnReport
from ensembles.tasks import Task

__all__ = [
    "FIT_PARAMS",
    "NO_MEMBERS_NOTE",
    "Keep",
    "Round",
    "RoundFit",
    "check_cancel",
    "classes_of",
    "fit_report",
    "positions_types",
    "validation_split",
]

# Spec parameters the service's fit reads (not the estimator's constructor).
FIT_PARAMS = frozenset({"early_stopping_rounds", "validation_fraction"})
NO_MEMBERS_NOTE = (
    "metrics.estimators is empty: a boosting round is not a member with a score of its own"
)
# Called after each round: (done, total) -> True to stop (a cancel).
Round = Callable[[int, int], bool]


def classes_of(module: str, names: Mapping[Task, str]) -> dict[Task, type]:
    """The library's estimator classes per task; stand-ins of the same names when the
    library is not installed, so the kind is still listed (and refused at submit)."""
    try:
        found = importlib.import_module(module)
    except ImportError:
        return {task: _absent(name, module) for task, name in names.items()}
    return {task: getattr(found, name) for task, name in names.items()}


def _absent(name: str, module: str) -> type:
    def refuse(self: object, **_: Any) -> None:
        raise ImportError(f"{module} is not installed")

    return type(name, (BaseEstimator,), {"__init__": refuse, "__module__": module})


@dataclass(frozen=True)
class Keep:
    """Asks a library's fit to keep its own answers on its rows where it can
    (``OwnReport.answers``): ``held`` the hold-out rows, preprocessed as the pipeline
    does (None: no hold-out), ``marks`` the curve's (``metrics.checkpoints`` of the
    rounds asked).  Only training's fit asks: cross-validation and refits keep nothing.

    ``fitted``: called as soon as the library's fit has returned, before the answers are
    read and checked: the model is final then, and work on it that needs no figure (the
    job's engine check, :mod:`ensembles.engine_verdict`) starts beside that reading."""

    held: NDArray[Any] | None
    marks: list[int]
    fitted: Callable[[], None] | None = None


@dataclass(frozen=True)
class RoundFit:
    """What a library's fit is given: rows to fit on, validation rows (early stopping),
    the rounds asked, and the per-round hook."""

    X: Any
    y: NDArray[Any]
    X_valid: Any | None
    y_valid: NDArray[Any] | None
    patience: int | None
    total: int
    on_round: Round | None

    def round_done(self, done: int) -> bool:
        """Report a round; True when the run was cancelled (the library then stops)."""
        return self.on_round is not None and self.on_round(done, self.total)


def validation_split(
    estimator: BaseEstimator,
    X: Any,
    y: NDArray[Any],
    params: Mapping[str, Any],
    size: int,
    on_round: Round | None,
) -> RoundFit:
    """The rows the library fits on and, with ``early_stopping_rounds``, the validation
    rows carved from them (``validation_fraction``, stratified where every class has two
    rows; seeded by the fit's ``random_state``): never the hold-out, which training
    keeps apart before this is called."""
    patience = params.get("early_stopping_rounds")
    if patience is None:
        return RoundFit(X, y, None, None, None, size, on_round)
    fraction = float(params.get("validation_fraction", 0.1))
    fit_rows, valid_rows = _split(estimator, y, fraction)
    return RoundFit(
        X[fit_rows], y[fit_rows], X[valid_rows], y[valid_rows], int(patience), size, on_round
    )


def _split(
    estimator: BaseEstimator, y: NDArray[Any], fraction: float
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Stratified where it can be (else plain); a validation row of a class the fit rows
    would lack goes back to them, so the model knows every class of its training rows."""
    rows = np.arange(len(y))
    seed = estimator.get_params().get("random_state")
    classifier = is_classifier(estimator)
    try:
        fit_rows, valid_rows = train_test_split(
            rows, test_size=fraction, random_state=seed, stratify=y if classifier else None
        )
    except ValueError:  # a class of one row, or fewer validation rows than classes
        fit_rows, valid_rows = train_test_split(rows, test_size=fraction, random_state=seed)
    if classifier:
        lacking = ~np.isin(y[valid_rows], y[fit_rows])
        fit_rows = np.concatenate([fit_rows, valid_rows[lacking]])
        valid_rows = valid_rows[~lacking]
    return np.sort(fit_rows), np.sort(valid_rows)


def fit_report(asked: int, kept: int, best: int | None, fit: RoundFit) -> OwnReport:
    """``metrics.stopping`` and the notes of a library fit: where and why it stopped."""
    if fit.patience is None or best is None:
        stopping = {
            "n_estimators": asked,
            "best_iteration": None,
            "reason": f"all {asked} rounds fitted (no early stopping)",
        }
        return OwnReport(metrics={"stopping": stopping}, notes=[NO_MEMBERS_NOTE])
    assert fit.y_valid is not None
    stopped_early = kept < asked
    reason = (
        f"early stopping: the validation score did not improve for {fit.patience} rounds "
        f"after round {best}"
        if stopped_early
        else f"all {asked} rounds fitted; the best validation score was at round {best}"
    )
    stopping = {
        "n_estimators": kept,
        "best_iteration": best,
        "reason": reason,
        "asked": asked,
        "validation_rows": len(fit.y_valid),
    }
    note = (
        f"early stopping on {len(fit.y_valid)} validation rows carved from the training "
        "rows (not the hold-out); the model predicts with its best rounds"
    )
    return OwnReport(metrics={"stopping": stopping}, notes=[NO_MEMBERS_NOTE, note])


def check_cancel(fit: RoundFit, done: int) -> None:
    """Report a round; raise the cancellation when the run was cancelled."""
    if fit.round_done(done):
        raise TrainingCancelledError("training was cancelled")


def positions_types(positions: Sequence[int], n: int) -> list[str]:
    """XGBoost's feature types: ``c`` at the category codes, ``q`` elsewhere."""
    at = set(positions)
    return ["c" if i in at else "q" for i in range(n)]
