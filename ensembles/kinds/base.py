"""What the service's own algorithms share: how they report, and what they become.

An own algorithm (``pasting_votes``, ``ensemble_selection``) is fitted through a
scikit-learn-style estimator of this package, so validation, building, cross-validation
and error attribution treat it like any other kind.  But no class of this service may
reach an artifact (API.md: a plain scikit-learn ``Pipeline``), so each ends as plain
scikit-learn objects: :func:`fitted_voting` assembles a fitted ``VotingClassifier`` /
``VotingRegressor`` from the members the algorithm fitted itself, and training swaps it
into the pipeline (:func:`ensembles.kinds.adopt`) together with the algorithm's
:class:`OwnReport`.

Assembly sets exactly what ``VotingClassifier.fit`` sets (``le_``, ``classes_``,
``estimators_``, ``named_estimators_``), members fitted on the encoded labels as
``fit`` fits them, so the result predicts as a ``VotingClassifier`` fitted on those
members would (tested against ``fit`` itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, clone
from sklearn.ensemble import VotingClassifier, VotingRegressor
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import Bunch

__all__ = [
    "MAX_SEED",
    "FitAnswers",
    "Monitor",
    "OwnEnsemble",
    "OwnReport",
    "curve",
    "fitted_voting",
    "seeded",
]

# Called as members are fitted: (done, total, stage); True asks the algorithm to stop
# (training then raises its cancellation), as gradient boosting's ``monitor`` does.
Monitor = Callable[[int, int, str], bool]
MAX_SEED = np.iinfo(np.int32).max  # the bound scikit-learn's own ensembles draw seeds below


@dataclass(frozen=True)
class OwnReport:
    """What an own algorithm measured while fitting, for the version's metrics.

    ``oob_sums``/``oob_counts``: per training row, the out-of-bag tallies (class votes,
    or summed predictions) and how many members voted, in the shape
    :func:`ensembles.metrics.oob_from_sums` takes; ``oob_points`` the legacy OOB score
    curve; ``metrics`` the extra blocks of :class:`ensembles.reports.Metrics`
    (``stopping``, ``selection``).
    """

    curves: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    oob_sums: NDArray[Any] | None = None
    oob_counts: NDArray[Any] | None = None
    oob_points: list[dict[str, Any]] = field(default_factory=list)
    # A boosting library's own answers on its rows, read while it fitted (None: none).
    answers: FitAnswers | None = None


@dataclass(frozen=True)
class FitAnswers:
    """What a boosting library answered itself while fitting (``Keep`` asked for it):
    ``predict_proba`` (classifier) or ``predict`` (regressor) on the training rows and on
    the hold-out rows, the same bits, and ``predict_at``'s answers at ``marks`` on the rows
    the curve is drawn on (the hold-out rows, else the training rows; None: not read)."""

    train: NDArray[np.float64]
    held: NDArray[np.float64] | None
    staged: Sequence[Any] | None
    marks: list[int]
    # ``staged``'s class codes (each label's position in ``classes_``), when read from
    # codes: the curve counts its hits on them rather than comparing labels (objects).
    staged_codes: list[NDArray[Any]] | None = None


class OwnEnsemble(BaseEstimator):  # type: ignore[misc]
    """Base of the service's own algorithms: after ``fit``, ``ensemble_`` is the plain
    scikit-learn estimator the artifact keeps and ``report_`` what fitting measured.

    Prediction delegates to ``ensemble_``, so cross-validation of a spec fits and scores
    these estimators like any other.  Parameter bounds are the catalog's (checked before
    anything is built): scikit-learn's own validation has nothing to add.
    """

    _parameter_constraints: dict[str, list[Any]] = {}  # noqa: RUF012 (scikit-learn's shape)

    ensemble_: BaseEstimator
    report_: OwnReport

    def predict(self, X: Any) -> NDArray[Any]:
        return np.asarray(self.ensemble_.predict(X))

    @property
    def n_features_in_(self) -> int:
        return int(self.ensemble_.n_features_in_)


def seeded(estimator: BaseEstimator, seed: int) -> BaseEstimator:
    """``estimator`` with every ``random_state`` at every level of nesting set to
    ``seed`` (what scikit-learn's bagging does to its members, by public means)."""
    names = [
        name
        for name in estimator.get_params(deep=True)
        if name == "random_state" or name.endswith("__random_state")
    ]
    if names:
        estimator.set_params(**dict.fromkeys(names, seed))
    return estimator


def fitted_voting(
    named: Sequence[tuple[str, BaseEstimator]],
    *,
    classes: NDArray[Any] | None,
    voting: str = "hard",
    weights: Sequence[float] | None = None,
) -> VotingClassifier | VotingRegressor:
    """A fitted ``VotingClassifier`` (``classes`` given: members fitted on their indices)
    or ``VotingRegressor`` of members already fitted, as ``fit`` would have left it."""
    estimators = [(name, clone(member)) for name, member in named]  # as given to fit
    weight_list = None if weights is None else [float(w) for w in weights]
    ensemble: VotingClassifier | VotingRegressor
    if classes is not None:
        ensemble = VotingClassifier(estimators, voting=voting, weights=weight_list)
        ensemble.le_ = LabelEncoder().fit(np.asarray(classes))
        ensemble.classes_ = ensemble.le_.classes_
    else:
        ensemble = VotingRegressor(estimators, weights=weight_list)
    ensemble.estimators_ = [member for _, member in named]
    ensemble.named_estimators_ = Bunch(**dict(named))
    return ensemble


def curve(
    name: str, x_label: str, x: Sequence[float], y_label: str, y: Sequence[float]
) -> dict[str, Any]:
    """A curve in the shape of :class:`ensembles.reports.Curve`."""
    return {
        "name": name,
        "x_label": x_label,
        "x": [float(v) for v in x],
        "y_label": y_label,
        "y": [float(v) for v in y],
    }
