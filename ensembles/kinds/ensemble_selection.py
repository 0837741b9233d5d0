"""Ensemble selection (Caruana et al., 2004) as an estimator: a library of named members,
their out-of-fold predictions, the selection (:mod:`ensembles.kinds.selection`), and the
selected members refitted on every row.

Out-of-fold predictions come from scikit-learn's ``cross_val_predict`` over ``cv``
folds, the same folds for every member (stratified for classification, shuffled with the
request's seed): probabilities for classification (every member must give them: the
result is a soft vote), values for regression.  The fitted model is a
``VotingClassifier(voting="soft")`` / ``VotingRegressor`` of the selected members under
their library names, ``weights`` = how often each was selected
(:func:`ensembles.kinds.base.fitted_voting`), so it predicts the weighted mean the
selection scored.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_predict
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_array

from ensembles.kinds.base import Monitor, OwnEnsemble, OwnReport, curve, fitted_voting
from ensembles.kinds.selection import METRICS, Metric, Selection, bag_size, bagged_selection
from ensembles.specs import EstimatorSpec

__all__ = ["EnsembleSelectionClassifier", "EnsembleSelectionRegressor", "spec_problems"]


class _EnsembleSelection(OwnEnsemble):
    """Shared by the classifier and the regressor (see the module's docstring)."""

    def __init__(
        self,
        estimators: list[tuple[str, BaseEstimator]],
        *,
        cv: int = 5,
        metric: str = "accuracy",
        init_size: int = 1,
        bags: int = 1,
        bag_fraction: float = 1.0,
        max_steps: int = 50,
        random_state: int | None = None,
    ) -> None:
        self.estimators = estimators
        self.cv = cv
        self.metric = metric
        self.init_size = init_size
        self.bags = bags
        self.bag_fraction = bag_fraction
        self.max_steps = max_steps
        self.random_state = random_state

    def _select(
        self,
        X: NDArray[Any],
        target: NDArray[Any],
        classes: NDArray[Any] | None,
        monitor: Monitor | None,
    ) -> tuple[list[tuple[str, BaseEstimator]], list[float], OwnReport]:
        metric = METRICS[self.metric]
        names = [name for name, _ in self.estimators]
        m = len(names)
        splitter = (
            StratifiedKFold(self.cv, shuffle=True, random_state=self.random_state)
            if classes is not None
            else KFold(self.cv, shuffle=True, random_state=self.random_state)
        )
        folds = list(splitter.split(X, target))
        method = "predict_proba" if classes is not None else "predict"
        predictions = []
        for i, (_, member) in enumerate(self.estimators):
            if monitor is not None and monitor(i, m, "out_of_fold"):
                return [], [], OwnReport()
            oof = cross_val_predict(clone(member), X, target, cv=folds, method=method)
            predictions.append(np.asarray(oof, dtype=np.float64))
        oof_matrix = np.asarray(predictions)
        if monitor is not None and monitor(m, m, "selecting"):
            return [], [], OwnReport()
        counts, runs = bagged_selection(
            oof_matrix,
            target,
            metric,
            init_size=self.init_size,
            max_steps=self.max_steps,
            bags=self.bags,
            bag_fraction=self.bag_fraction,
            rng=np.random.default_rng(self.random_state),
        )
        chosen = [j for j in range(m) if counts[j] > 0]
        fitted: list[tuple[str, BaseEstimator]] = []
        for done, j in enumerate(chosen):
            if monitor is not None and monitor(done, len(chosen), "refitting"):
                return [], [], OwnReport()
            fitted.append((names[j], clone(self.estimators[j][1]).fit(X, target)))
        if monitor is not None:
            monitor(len(chosen), len(chosen), "refitting")
        weights = [float(counts[j]) for j in chosen]
        report = self._report(oof_matrix, target, metric, names, counts, runs, len(folds))
        return fitted, weights, report

    def _report(
        self,
        oof: NDArray[np.float64],
        target: NDArray[Any],
        metric: Metric,
        names: list[str],
        counts: NDArray[np.int64],
        runs: list[tuple[NDArray[np.intp], Selection]],
        n_folds: int,
    ) -> OwnReport:
        label = f"out-of-fold {metric.name}"
        curves = [
            curve(
                "selection" if len(runs) == 1 else f"selection_bag_{b + 1}",
                "step",
                range(len(run.curve)),
                label,
                run.curve,
            )
            for b, (_, run) in enumerate(runs)
        ]
        running = np.zeros_like(counts)
        by_bags: list[float] = []
        for subset, run in runs:
            running[subset] += run.counts(len(subset))
            by_bags.append(_score(oof, target, metric, running))
        if len(runs) > 1:
            curves.append(
                curve("bagged_selection", "bags", range(1, len(runs) + 1), label, by_bags)
            )
        member_oof = {name: _plain(metric.value(target, oof[j])) for j, name in enumerate(names)}
        selection = {
            "weights": {name: int(counts[j]) for j, name in enumerate(names) if counts[j] > 0},
            "member_oof": member_oof,
            "ensemble_oof": _plain(by_bags[-1]),
            "metric": metric.name,
            "greater_is_better": metric.greater_is_better,
            "folds": n_folds,
            "init_size": self.init_size,
            "max_steps": self.max_steps,
            "bags": self.bags,
            "bag_fraction": self.bag_fraction,
            "best_steps": [run.best_step for _, run in runs],
        }
        return OwnReport(curves=curves, metrics={"selection": selection})


def _score(
    oof: NDArray[np.float64], target: NDArray[Any], metric: Metric, counts: NDArray[np.int64]
) -> float:
    """The metric of the counts-weighted mean of the members' out-of-fold predictions."""
    weights = counts.astype(np.float64)
    mean = np.tensordot(weights, oof, axes=1) / weights.sum()
    return metric.value(target, mean)


def _plain(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


class EnsembleSelectionClassifier(ClassifierMixin, _EnsembleSelection):  # type: ignore[misc]
    """Becomes a soft ``VotingClassifier`` of the selected members, weighted by counts."""

    def fit(self, X: Any, y: Any, monitor: Monitor | None = None) -> EnsembleSelectionClassifier:
        rows = check_array(X)
        encoder = LabelEncoder().fit(y)
        codes = encoder.transform(y)
        fitted, weights, report = self._select(rows, codes, encoder.classes_, monitor)
        self.classes_ = encoder.classes_
        self.ensemble_ = fitted_voting(
            fitted, classes=encoder.classes_, voting="soft", weights=weights
        )
        self.report_ = report
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        return np.asarray(self.ensemble_.predict_proba(X), dtype=np.float64)


class EnsembleSelectionRegressor(RegressorMixin, _EnsembleSelection):  # type: ignore[misc]
    """Becomes a ``VotingRegressor`` of the selected members, weighted by counts."""

    def __init__(
        self,
        estimators: list[tuple[str, BaseEstimator]],
        *,
        cv: int = 5,
        metric: str = "r2",
        init_size: int = 1,
        bags: int = 1,
        bag_fraction: float = 1.0,
        max_steps: int = 50,
        random_state: int | None = None,
    ) -> None:
        super().__init__(
            estimators,
            cv=cv,
            metric=metric,
            init_size=init_size,
            bags=bags,
            bag_fraction=bag_fraction,
            max_steps=max_steps,
            random_state=random_state,
        )

    def fit(self, X: Any, y: Any, monitor: Monitor | None = None) -> EnsembleSelectionRegressor:
        rows = check_array(X)
        target = np.asarray(y, dtype=np.float64)
        fitted, weights, report = self._select(rows, target, None, monitor)
        self.ensemble_ = fitted_voting(fitted, classes=None, weights=weights)
        self.report_ = report
        return self


def spec_problems(spec: EstimatorSpec) -> list[tuple[tuple[str | int, ...], str]]:
    """What the catalog's bounds cannot see: ``init_size`` against the library (and
    against the members each bag draws).  Paths are relative to the spec."""
    n = len(spec.estimators or [])
    init_size = spec.params.get("init_size")
    if not n or not isinstance(init_size, int):
        return []
    if init_size > n:
        return [
            (
                ("params", "init_size"),
                f"init_size={init_size}, but the library has {n} estimator"
                f"{'s' if n != 1 else ''}: set init_size to at most {n}",
            )
        ]
    fraction = spec.params.get("bag_fraction")
    drawn = bag_size(n, fraction) if isinstance(fraction, int | float) else n
    if init_size > drawn:
        return [
            (
                ("params", "init_size"),
                f"init_size={init_size}, but each bag draws {drawn} of the {n} estimators "
                f"(bag_fraction={fraction}): set init_size to at most {drawn}, or raise "
                "bag_fraction",
            )
        ]
    return []
