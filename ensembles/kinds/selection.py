"""Caruana et al. (2004), "Ensemble selection from libraries of models": the selection
itself, on a matrix of predictions, with no estimator in sight (so it is tested on a
hand-made matrix).

Given each library member's out-of-fold predictions (probabilities per class, or
values) and a metric:

* **sorted initialisation**: the ``init_size`` members with the best own score start the
  ensemble, once each;
* **greedy forward selection with replacement**: at each of ``max_steps`` steps, the
  member whose addition gives the best score of the ensemble's mean prediction is added
  (it may already be in: its weight grows); ties go to the first member in library order;
* **best prefix**: the selected ensemble is the prefix of that sequence with the best
  score (the earliest on ties), so adding steps never makes the result worse on these
  predictions;
* **bagged selection**: ``bags`` times, a random ``bag_fraction * m`` (rounded, at
  least 1) of the ``m`` members are drawn (without replacement) and selected from as
  above; the final weights are the sums of the bags' counts.

The ensemble's prediction for a row is the mean of its members' predictions, each
counted as often as it was selected: what a ``VotingClassifier(voting="soft")`` /
``VotingRegressor`` with the counts as ``weights`` computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn import metrics as skm

from ensembles.tasks import Task

__all__ = [
    "METRICS",
    "Metric",
    "Selection",
    "bag_size",
    "bagged_selection",
    "greedy_selection",
]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Metric:
    """A selection metric: (target, predictions) -> value; the task it is for."""

    name: str
    task: Task
    greater_is_better: bool
    value: Callable[[NDArray[Any], FloatArray], float]

    def better(self, a: float, b: float) -> bool:
        """Is ``a`` strictly better than ``b``?  (NaN is worse than anything.)"""
        if math.isnan(a):
            return False
        if math.isnan(b):
            return True
        return a > b if self.greater_is_better else a < b


def _labels(proba: FloatArray) -> NDArray[np.intp]:
    return np.asarray(np.argmax(proba, axis=1), dtype=np.intp)  # first maximum, as soft voting


def _accuracy(y: NDArray[Any], p: FloatArray) -> float:
    return float(np.mean(_labels(p) == y))


def _balanced(y: NDArray[Any], p: FloatArray) -> float:
    return float(skm.balanced_accuracy_score(y, _labels(p)))


def _f1_macro(y: NDArray[Any], p: FloatArray) -> float:
    labels = list(range(p.shape[1]))
    return float(skm.f1_score(y, _labels(p), average="macro", labels=labels, zero_division=0))


def _log_loss(y: NDArray[Any], p: FloatArray) -> float:
    return float(skm.log_loss(y, p, labels=list(range(p.shape[1]))))


def _roc_auc(y: NDArray[Any], p: FloatArray) -> float:
    if len(np.unique(y)) < p.shape[1]:
        return math.nan  # a class without rows: undefined
    if p.shape[1] == 2:
        return float(skm.roc_auc_score(y, p[:, 1]))
    normalised = p / p.sum(axis=1, keepdims=True)
    labels = list(range(p.shape[1]))
    return float(
        skm.roc_auc_score(y, normalised, multi_class="ovr", average="macro", labels=labels)
    )


def _r2(y: NDArray[Any], v: FloatArray) -> float:
    return float(skm.r2_score(y, v)) if len(y) > 1 else math.nan


def _rmse(y: NDArray[Any], v: FloatArray) -> float:
    return math.sqrt(float(np.mean((np.asarray(y, dtype=np.float64) - v) ** 2)))


def _mae(y: NDArray[Any], v: FloatArray) -> float:
    return float(np.mean(np.abs(np.asarray(y, dtype=np.float64) - v)))


METRICS: Mapping[str, Metric] = {
    m.name: m
    for m in (
        Metric("accuracy", "classification", True, _accuracy),
        Metric("balanced_accuracy", "classification", True, _balanced),
        Metric("f1_macro", "classification", True, _f1_macro),
        Metric("log_loss", "classification", False, _log_loss),
        Metric("roc_auc", "classification", True, _roc_auc),
        Metric("r2", "regression", True, _r2),
        Metric("rmse", "regression", False, _rmse),
        Metric("mae", "regression", False, _mae),
    )
}


@dataclass(frozen=True)
class Selection:
    """One greedy selection: the members added in order (the ``init_size`` first), the
    score after step 0 (the initial members) to ``max_steps``, and the best step."""

    added: tuple[int, ...]
    curve: tuple[float, ...]
    best_step: int
    init_size: int

    def counts(self, n_members: int) -> NDArray[np.int64]:
        """How often each member is in the best prefix."""
        kept = self.added[: self.init_size + self.best_step]
        return np.bincount(np.asarray(kept, dtype=np.int64), minlength=n_members)


def greedy_selection(
    predictions: FloatArray, target: NDArray[Any], metric: Metric, init_size: int, max_steps: int
) -> Selection:
    """Selection with replacement over ``predictions`` (members x rows [x classes])."""
    m = predictions.shape[0]
    own = [metric.value(target, predictions[j]) for j in range(m)]
    order = sorted(range(m), key=_rank_key(own, metric))
    added = order[: min(init_size, m)]
    total = np.sum(predictions[added], axis=0)
    size = len(added)
    curve = [metric.value(target, total / size)]
    for _ in range(max_steps):
        best_j, best_value = -1, math.nan
        for j in range(m):
            value = metric.value(target, (total + predictions[j]) / (size + 1))
            if best_j < 0 or metric.better(value, best_value):
                best_j, best_value = j, value
        added.append(best_j)
        total = total + predictions[best_j]
        size += 1
        curve.append(best_value)
    best_step = 0
    for step, value in enumerate(curve):
        if metric.better(value, curve[best_step]):
            best_step = step
    return Selection(tuple(added), tuple(curve), best_step, len(added) - max_steps)


def _rank_key(own: list[float], metric: Metric) -> Callable[[int], tuple[int, float, int]]:
    """Best own score first (NaN last), library order on ties."""

    def key(j: int) -> tuple[int, float, int]:
        value = own[j]
        if math.isnan(value):
            return (1, 0.0, j)
        return (0, -value if metric.greater_is_better else value, j)

    return key


def bag_size(n_members: int, bag_fraction: float) -> int:
    """Members drawn per bag: ``bag_fraction * m`` rounded (halves up), at least 1."""
    return max(1, min(n_members, math.floor(bag_fraction * n_members + 0.5)))


def bagged_selection(
    predictions: FloatArray,
    target: NDArray[Any],
    metric: Metric,
    *,
    init_size: int,
    max_steps: int,
    bags: int,
    bag_fraction: float,
    rng: np.random.Generator,
) -> tuple[NDArray[np.int64], list[tuple[NDArray[np.intp], Selection]]]:
    """The summed counts over ``bags`` selections, each on a random subset of members
    (every member when ``bag_fraction`` is 1), and each bag's members and selection."""
    m = predictions.shape[0]
    size = bag_size(m, bag_fraction)
    counts = np.zeros(m, dtype=np.int64)
    runs: list[tuple[NDArray[np.intp], Selection]] = []
    for _ in range(bags):
        subset = (
            np.arange(m, dtype=np.intp)
            if size == m
            else np.sort(rng.choice(m, size=size, replace=False)).astype(np.intp)
        )
        selection = greedy_selection(predictions[subset], target, metric, init_size, max_steps)
        counts[subset] += selection.counts(len(subset))
        runs.append((subset, selection))
    return counts, runs
