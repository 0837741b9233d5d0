"""Breiman's pasting of small votes (1999): Rvotes and Ivotes, with out-of-bag stopping.

Members are fitted one after another, each on a small "bite" of ``bite_size`` rows:
drawn at random (``sampling="random"``, Rvotes), or by importance (``"importance"``,
Ivotes): rows are drawn at random and a row that the current aggregate, judged out of
bag, misclassifies (or has not voted on yet) is always accepted, a correctly classified
one with probability e/(1-e), e the current out-of-bag error estimate.  The aggregate is
an unweighted majority vote (regression: the mean).

After each member the out-of-bag error r(k) of the aggregate is measured, each row voted
on only by the members whose bites did not contain it, and smoothed as in the paper:
e(1) = r(1), e(k) = p e(k-1) + (1-p) r(k) with p = 0.75 (classification: the error
rate; regression: the mean squared error).  Growth stops when e(k) has not improved for
``patience`` members, when it reaches 0 (nothing is left to learn, and Ivotes would
accept no correctly classified row), or at ``max_estimators``; every member fitted is
kept.

This is the algorithm for tables too big for one fit, so its memory is bounded by the
bite, not the table: no member's predictions are kept, only per-row out-of-bag tallies
(votes per class as ``uint16``, or a sum and a count), and members predict the table in
chunks of a few bites.  The fitted model is a ``VotingClassifier(voting="hard")``
/ ``VotingRegressor`` of the members (:func:`ensembles.kinds.base.fitted_voting`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.preprocessing import LabelEncoder
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils import check_array

from ensembles.kinds.base import (
    MAX_SEED,
    Monitor,
    OwnEnsemble,
    OwnReport,
    curve,
    fitted_voting,
    seeded,
)

__all__ = [
    "CHUNK_ROWS",
    "SMOOTHING",
    "PastingVotesClassifier",
    "PastingVotesRegressor",
    "importance_bite",
    "smoothed",
]

SMOOTHING = 0.75  # Breiman's p: e(k) = p e(k-1) + (1 - p) r(k)
# Rows a member predicts at once while the tallies are updated: a few bites (at least
# CHUNK_ROWS), so the temporaries grow with the bite, never with the table.
CHUNK_ROWS = 4096
CHUNK_BITES = 4
_MAX_BATCH = 1 << 20  # candidate rows drawn at once by importance sampling

IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]


def smoothed(previous: float | None, error: float) -> float:
    """Breiman's smoothed estimate: e(1) = r(1), then p e(k-1) + (1-p) r(k)."""
    return error if previous is None else SMOOTHING * previous + (1 - SMOOTHING) * error


@dataclass
class _Step:
    """The aggregate's out-of-bag figures after one more member."""

    error: float  # r(k): error rate, or mean squared error
    score: float | None  # accuracy, or r2 (None: undefined)
    n_voted: int  # rows with at least one out-of-bag vote


class _Tallies:
    """Per training row: the out-of-bag votes per class (or the summed predictions) and
    how many members voted.  ``uint16`` counts: at most 65,535 members (the catalog
    allows 5,000)."""

    def __init__(self, target: NDArray[Any], n_classes: int | None) -> None:
        n = len(target)
        self.target = target
        self.classification = n_classes is not None
        self.sums: NDArray[Any] = (
            np.zeros((n, n_classes), dtype=np.uint16)
            if n_classes is not None
            else np.zeros(n, dtype=np.float64)
        )
        self.counts = np.zeros(n, dtype=np.uint16)

    def misjudged(self, rows: IntArray) -> BoolArray:
        """Rows the out-of-bag aggregate gets wrong, or has not voted on yet."""
        votes = self.sums[rows]
        wrong = np.argmax(votes, axis=1) != self.target[rows]
        return np.asarray(wrong | (self.counts[rows] == 0))

    def add(self, member: BaseEstimator, X: NDArray[Any], in_bite: BoolArray, bite: int) -> _Step:
        """Let ``member`` vote on every row outside its bite, chunk by chunk, and measure
        the aggregate's out-of-bag error on the rows voted on so far."""
        n = X.shape[0]
        wrong, sse, n_voted = 0, 0.0, 0
        y_sum, y_sq = 0.0, 0.0
        chunk = max(CHUNK_ROWS, CHUNK_BITES * bite)
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            out = np.flatnonzero(~in_bite[start:stop])
            if out.size:
                rows = start + out
                # The chunk as a view (no copy of the rows); the bite's own rows predicted
                # in it are dropped.
                pred = np.asarray(member.predict(X[start:stop]))[out]
                if self.classification:
                    self.sums[rows, pred.astype(np.intp)] += 1
                else:
                    self.sums[rows] += pred.astype(np.float64)
                self.counts[rows] += 1
            counts = self.counts[start:stop]
            voted = counts > 0
            n_voted += int(np.count_nonzero(voted))
            target = self.target[start:stop][voted]
            if self.classification:
                winners = np.argmax(self.sums[start:stop][voted], axis=1)
                wrong += int(np.count_nonzero(winners != target))
            else:
                mean = self.sums[start:stop][voted] / counts[voted]
                sse += float(np.sum((mean - target) ** 2))
                y_sum += float(np.sum(target))
                y_sq += float(np.sum(target**2))
        if n_voted == 0:
            return _Step(math.nan, None, 0)
        if self.classification:
            return _Step(wrong / n_voted, 1.0 - wrong / n_voted, n_voted)
        sst = y_sq - y_sum * y_sum / n_voted
        return _Step(sse / n_voted, 1.0 - sse / sst if sst > 0 else None, n_voted)


def random_bite(rng: np.random.Generator, n: int, size: int) -> IntArray:
    """Rvotes: ``size`` distinct rows at random."""
    return np.sort(rng.choice(n, size=size, replace=False)).astype(np.intp)


def importance_bite(
    rng: np.random.Generator,
    n: int,
    size: int,
    misjudged: Callable[[IntArray], BoolArray],
    accept: float,
    taken: BoolArray,
) -> IntArray:
    """Ivotes: rows drawn at random, a misjudged one always kept, any other with
    probability ``accept`` (e/(1-e)), until ``size`` distinct rows are kept.

    ``taken`` (all False on entry) marks the rows kept; the caller clears it after use.
    Candidates are drawn in batches sized by the last batch's acceptance rate, so a low
    error (few rows accepted) costs more draws, never an unbounded array.
    """
    parts: list[IntArray] = []
    need = size
    rate = 1.0 if accept >= 1 else max(accept, 0.01)
    while need:
        batch = int(min(max(1.25 * need / rate + 16, 64), _MAX_BATCH))
        candidates = rng.integers(0, n, size=batch).astype(np.intp)
        if accept < 1:
            keep = misjudged(candidates) | (rng.random(batch) < accept)
            candidates = candidates[keep]
        rate = max(candidates.size / batch, 1e-4)
        candidates = candidates[~taken[candidates]]
        _, first = np.unique(candidates, return_index=True)
        candidates = candidates[np.sort(first)][:need]
        taken[candidates] = True
        parts.append(candidates)
        need -= candidates.size
    return np.sort(np.concatenate(parts))


@dataclass
class _Growth:
    """What growing the members measured: the curves, and where and why it stopped."""

    members: list[BaseEstimator]
    bites: list[IntArray]
    raw: list[float]
    smoothed: list[float]
    steps: list[_Step]
    reason: str
    best_at: int
    bite_size: int


class _PastingVotes(OwnEnsemble):
    """Shared by the classifier and the regressor (see the module's docstring)."""

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        *,
        bite_size: int = 100,
        sampling: str = "importance",
        patience: int = 10,
        max_estimators: int = 100,
        random_state: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.bite_size = bite_size
        self.sampling = sampling
        self.patience = patience
        self.max_estimators = max_estimators
        self.random_state = random_state

    def _default_estimator(self) -> BaseEstimator:
        raise NotImplementedError

    def _grow(
        self, X: NDArray[Any], target: NDArray[Any], n_classes: int | None, monitor: Monitor | None
    ) -> _Growth:
        n = X.shape[0]
        bite_size = max(1, min(int(self.bite_size), n - 1))
        rng = np.random.default_rng(self.random_state)
        importance = self.sampling == "importance" and n_classes is not None
        tallies = _Tallies(target, n_classes)
        taken = np.zeros(n, dtype=bool)
        base = self.estimator if self.estimator is not None else self._default_estimator()
        growth = _Growth([], [], [], [], [], "max_estimators", 0, bite_size)
        best, e = math.inf, None
        total = int(self.max_estimators)
        for k in range(1, total + 1):
            if monitor is not None and monitor(k - 1, total, "fitting"):
                growth.reason = "cancelled"
                break
            if importance:
                accept = 1.0 if e is None or e >= 0.5 else e / (1 - e)
                bite = importance_bite(rng, n, bite_size, tallies.misjudged, accept, taken)
            else:
                bite = random_bite(rng, n, bite_size)
                taken[bite] = True
            member = seeded(clone(base), int(rng.integers(MAX_SEED)))
            member.fit(X[bite], target[bite])
            step = tallies.add(member, X, taken, bite_size)
            taken[bite] = False
            e = smoothed(e, step.error)
            growth.members.append(member)
            growth.bites.append(bite)
            growth.raw.append(step.error)
            growth.smoothed.append(e)
            growth.steps.append(step)
            if e < best:
                best, growth.best_at = e, k
            elif k - growth.best_at >= self.patience:
                growth.reason = "patience"
                break
            if e == 0:
                growth.reason = "zero_error"
                break
        if monitor is not None:
            monitor(len(growth.members), total, "fitting")
        self._tallies = tallies
        return growth

    def _report(self, growth: _Growth, regression: bool) -> OwnReport:
        k = len(growth.members)
        what = "mean squared error" if regression else "error rate"
        x = list(range(1, k + 1))
        reasons = {
            "patience": f"e(k) did not improve for {self.patience} members "
            f"(best after {growth.best_at})",
            "max_estimators": f"max_estimators={self.max_estimators} members were fitted",
            "zero_error": "the out-of-bag error reached 0: no row is left to learn from",
            "cancelled": "training was cancelled",
        }
        stopping = {
            "n_estimators": k,
            "reason": growth.reason,
            "detail": reasons[growth.reason],
            "best_n_estimators": growth.best_at,
            "oob_error": growth.smoothed[-1] if growth.smoothed else None,
            "best_oob_error": growth.smoothed[growth.best_at - 1] if growth.best_at else None,
            "error": what,
            "sampling": self.sampling if not regression else "random",
            "bite_size": growth.bite_size,
            "smoothing": SMOOTHING,
        }
        notes = []
        if growth.bite_size != self.bite_size:
            notes.append(
                f"bite_size={self.bite_size} leaves no row out of bag on {growth.bite_size + 1} "
                f"rows: bites of {growth.bite_size} rows were drawn"
            )
        points = [
            {"n_estimators": i, "score": step.score, "n_scored": step.n_voted}
            for i, step in enumerate(growth.steps, start=1)
        ]
        return OwnReport(
            curves=[
                curve(
                    "oob_error", "members", x, f"smoothed out-of-bag {what} e(k)", growth.smoothed
                ),
                curve("oob_error_raw", "members", x, f"out-of-bag {what} r(k)", growth.raw),
            ],
            metrics={"stopping": stopping},
            notes=notes,
            oob_sums=self._tallies.sums,
            oob_counts=self._tallies.counts,
            oob_points=points,
        )


def _names(members: list[BaseEstimator]) -> list[tuple[str, BaseEstimator]]:
    return [(f"member_{i}", member) for i, member in enumerate(members)]


class PastingVotesClassifier(ClassifierMixin, _PastingVotes):  # type: ignore[misc]
    """Rvotes / Ivotes; becomes a hard ``VotingClassifier`` of its members."""

    def _default_estimator(self) -> BaseEstimator:
        return DecisionTreeClassifier()

    def fit(self, X: Any, y: Any, monitor: Monitor | None = None) -> PastingVotesClassifier:
        rows = check_array(X)
        encoder = LabelEncoder().fit(y)
        codes = encoder.transform(y).astype(np.intp)
        growth = self._grow(rows, codes, len(encoder.classes_), monitor)
        self.classes_ = encoder.classes_
        self.ensemble_ = fitted_voting(
            _names(growth.members), classes=encoder.classes_, voting="hard"
        )
        self.report_ = self._report(growth, regression=False)
        self.bites_ = growth.bites  # each member's rows (bounded by bites x members)
        del self._tallies
        return self


class PastingVotesRegressor(RegressorMixin, _PastingVotes):  # type: ignore[misc]
    """Random bites averaged; becomes a ``VotingRegressor`` of its members."""

    def _default_estimator(self) -> BaseEstimator:
        return DecisionTreeRegressor()

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        *,
        bite_size: int = 100,
        sampling: str = "random",
        patience: int = 10,
        max_estimators: int = 100,
        random_state: int | None = None,
    ) -> None:
        super().__init__(
            estimator,
            bite_size=bite_size,
            sampling=sampling,
            patience=patience,
            max_estimators=max_estimators,
            random_state=random_state,
        )

    def fit(self, X: Any, y: Any, monitor: Monitor | None = None) -> PastingVotesRegressor:
        rows = check_array(X)
        target = np.asarray(y, dtype=np.float64)
        growth = self._grow(rows, target, None, monitor)
        self.ensemble_ = fitted_voting(_names(growth.members), classes=None)
        self.report_ = self._report(growth, regression=True)
        self.bites_ = growth.bites
        del self._tallies
        return self
