"""A LightGBM model's staged answers and its final answers from ONE walk of its trees.

Training scores the rows the curve is drawn on twice otherwise: ``predict_proba`` with
every kept round (the scores), then the raw scores of the rounds between the curve's
marks (the curve).  On 200,000 rows x 500 rounds each walk costs about as much as the
fit, and the first costs more than the second: a row walked through all 500 trees at
once misses the caches that a chunk of 10 trees keeps warm (2.8-3.8 s against 1.2 s on
50,000 rows).

Here each chunk of rounds answers its leaf indices (``pred_leaf``), and the trees' leaf
values are added up per row in numpy, tree by tree, in LightGBM's own order:

* the curve's raw scores as :func:`ensembles.kinds.lightgbm_kind.predict_at` made them
  (each chunk summed from zero, then added to the running total): the same bits, so the
  same points;
* the kept rounds' raw score as ``predict(raw_score=True)`` makes it (one sum from zero
  over every tree), then LightGBM's own link, written as its C++ writes it: the sigmoid
  ``1 / (1 + exp(-raw))`` (binary) or the softmax (max, ``exp`` of the differences,
  sequential sum, division); ``exp`` is the C library's (Python's ``math.exp``, not
  numpy's vectorised one, which differs in the last bit on about 5% of values); the
  regression objectives the catalog allows have no link.

So the probabilities are LightGBM's ``predict_proba`` bit for bit, which is checked on
every model: a sample of rows is answered by LightGBM itself, and on any difference (a
LightGBM built against another ``exp``, an objective with another link) the final
answers are LightGBM's own ``predict_proba`` / ``predict`` on every row, as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["StagedAnswers", "leaf_values", "staged_answers"]

# Leaf indices answered per LightGBM call, at most (rows x trees): 8e6 is 64 MB of the
# float64 matrix LightGBM fills before its Python side makes it int32.
MAX_LEAVES_PER_CALL = 8_000_000
# Rows LightGBM answers itself to check the reproduced final answers, spread evenly.
CHECK_ROWS = 256
_LINKS = {"binary": "sigmoid", "multiclass": "softmax", "softmax": "softmax"}
_NO_LINK = {"regression", "regression_l2", "l2", "regression_l1", "l1", "huber", "quantile"}


@dataclass(frozen=True)
class StagedAnswers:
    """``staged``: the answers after each mark (``lightgbm_kind.predict_at``'s); ``final``:
    the kept rounds' ``predict_proba`` (classifier) or ``predict`` (regressor);
    ``reproduced``: whether ``final`` came from the walk (else LightGBM answered it)."""

    staged: list[Any]
    final: NDArray[np.float64]
    reproduced: bool


def staged_answers(estimator: Any, X: Any, marks: list[int]) -> StagedAnswers:
    """The answers after each number of rounds in ``marks`` (increasing, the last one the
    rounds the model keeps) and the final answers, from one walk of the trees."""
    from ensembles.kinds.lightgbm_kind import _labels

    X = np.ascontiguousarray(X)  # once: LightGBM copies other layouts on every call
    booster = estimator.booster_
    per_round = int(booster.num_model_per_iteration())
    values = leaf_values(booster)
    n = X.shape[0]
    running: NDArray[np.float64] | None = None  # the curve's total, chunk by chunk
    whole = np.zeros((n, per_round))  # every tree from zero: predict(raw_score=True)'s sum
    staged: list[Any] = []
    start = 0
    step = max(1, MAX_LEAVES_PER_CALL // max(1, n * per_round))
    for mark in marks:
        chunk = np.zeros((n, per_round))
        for first in range(start, mark, step):
            count = min(step, mark - first)
            leaves = estimator.predict(
                X, pred_leaf=True, start_iteration=first, num_iteration=count
            ).reshape(n, count * per_round)
            for j in range(count * per_round):
                tree = first * per_round + j
                answer = values[tree].take(leaves[:, j])
                chunk[:, j % per_round] += answer
                whole[:, j % per_round] += answer
        raw = chunk[:, 0] if per_round == 1 else chunk
        running = raw if running is None else running + raw
        start = mark
        staged.append(_labels(estimator, running))
    final = _final(estimator, whole)
    if final is not None and _agrees(estimator, X, final):
        return StagedAnswers(staged, final, True)
    return StagedAnswers(staged, _library_final(estimator, X), False)


def leaf_values(booster: Any) -> list[NDArray[np.float64]]:
    """Every tree's leaf values, in tree order, exactly: LightGBM writes them in its model
    text with 17 significant digits, which Python's ``float`` reads back to the bits."""
    values = []
    for line in booster.model_to_string(num_iteration=-1).splitlines():
        if line.startswith("leaf_value="):
            values.append(np.array([float(v) for v in line[11:].split()], dtype=np.float64))
    return values


def _final(estimator: Any, raw: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """LightGBM's answers from the kept rounds' raw scores (None: a link not written
    here, so LightGBM answers)."""
    objective = str(getattr(estimator, "objective_", ""))
    if getattr(estimator, "classes_", None) is None:
        return raw[:, 0].copy() if objective in _NO_LINK and raw.shape[1] == 1 else None
    link = _LINKS.get(objective)
    sigmoid = float(estimator.booster_.params.get("sigmoid", 1.0))
    if link == "sigmoid" and raw.shape[1] == 1 and sigmoid == 1.0:
        p = 1.0 / (1.0 + _exp(-raw[:, 0]))
        return np.vstack((1.0 - p, p)).transpose()
    if link == "softmax" and raw.shape[1] > 1:
        return _softmax(raw)
    return None


def _softmax(raw: NDArray[np.float64]) -> NDArray[np.float64]:
    """LightGBM's ``Common::Softmax``: exp of each score less the row's largest, summed
    class by class from zero, each divided by the sum."""
    top = raw.max(axis=1)
    out = np.empty_like(raw)
    total = np.zeros(raw.shape[0])
    for k in range(raw.shape[1]):
        out[:, k] = _exp(raw[:, k] - top)
        total += out[:, k]
    out /= total[:, None]
    return out


def _exp(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """The C library's ``exp`` of each value (as LightGBM's ``std::exp``)."""
    return np.fromiter(map(math.exp, x.tolist()), dtype=np.float64, count=len(x))


def _agrees(estimator: Any, X: NDArray[Any], final: NDArray[np.float64]) -> bool:
    """Whether LightGBM itself answers a spread sample of the rows with the same bits."""
    rows = np.unique(np.linspace(0, len(X) - 1, min(CHECK_ROWS, len(X))).astype(np.intp))
    if len(rows) == 0:
        return True
    return bool(np.array_equal(_library_final(estimator, X[rows]), final[rows]))


def _library_final(estimator: Any, X: NDArray[Any]) -> NDArray[np.float64]:
    if getattr(estimator, "classes_", None) is None:
        return np.asarray(estimator.predict(X), dtype=np.float64)
    return np.asarray(estimator.predict_proba(X), dtype=np.float64)
