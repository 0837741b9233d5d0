"""scikit-learn gradient boosting's raw scores with its trees walked outside the GIL: the
same sum in the same order, so the same bits.

Why: ``GradientBoostingClassifier`` and ``GradientBoostingRegressor`` add their trees with
``predict_stages``, a Cython loop that holds the GIL from the first tree to the last.  A
big request answered in parts on several threads (:mod:`ensembles.inference.row_parts`)
then ran its parts one after the other: a 10,000-row request of 100 trees took the
floor's whole time, plus the service's own, while the second core sat idle.  Each
tree's ``tree_.apply`` (the same walk, rows against the same thresholds) releases the
GIL, so parts summed tree by tree here run side by side.  Figures: docs/performance.md.

Done as ``_raw_predict`` does it: the rows validated as ``decision_function`` validates
them (float32, C order), the init estimator's raw predictions, then for each stage and
each of its trees ``raw[i, k] += learning_rate * value[leaf]``, in stage order, a product
and a sum of float64s exactly as the C loop makes them (the product depends on the
leaf only, so it is made once per tree and kept).  Only for dense rows and the kind
whose compiled form is ``boosting`` (scikit-learn's two gradient boosting classes, trees
of one output); anything else is left to the library (None).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from sklearn.utils.validation import validate_data

from ensembles.catalog import kind_of

__all__ = ["boosted_raw"]

FloatArray = NDArray[np.float64]
# A fitted model's trees and their scaled leaf values, by model, with the ``estimators_``
# array they were read from (a refit makes a new one; the stored models never change).
_Walk = list[list[tuple[Any, FloatArray]]]
_WALKS: weakref.WeakKeyDictionary[Any, tuple[Any, _Walk]] = weakref.WeakKeyDictionary()


def boosted_raw(estimator: Any, Xt: NDArray[Any]) -> FloatArray | None:
    """The raw scores ``_raw_predict`` gives for ``Xt`` (shape (rows, trees per stage)),
    else None (not scikit-learn's gradient boosting, or sparse rows)."""
    kind = kind_of(estimator)  # scikit-learn's gradient boosting (not its histogram kind)
    if kind is None or kind.compiled != "boosting":
        return None
    if sparse.issparse(Xt):
        return None
    walk = _walk(estimator)
    if walk is None:
        return None
    X = validate_data(estimator, Xt, dtype=np.float32, order="C", accept_sparse="csr", reset=False)
    raw = np.asarray(estimator._raw_predict_init(X), dtype=np.float64)
    for stage in walk:
        for k, (tree, scaled) in enumerate(stage):
            column = raw[:, k]
            np.add(column, scaled.take(tree.apply(X)), out=column)
    return raw


def _walk(estimator: Any) -> _Walk | None:
    """Each stage's trees (``tree_``) with ``learning_rate * value`` per node; None when a
    tree's values are not one per node (as ``predict_stages`` reads them)."""
    stages = getattr(estimator, "estimators_", None)
    if not isinstance(stages, np.ndarray) or stages.ndim != 2 or stages.size == 0:
        return None
    kept = _WALKS.get(estimator)
    if kept is not None and kept[0] is stages:
        return kept[1]
    scale = float(estimator.learning_rate)
    walk = []
    for stage in stages:
        trees = []
        for member in stage:
            tree = member.tree_
            value = np.asarray(tree.value, dtype=np.float64)
            if value.shape != (tree.node_count, 1, 1):
                return None
            trees.append((tree, scale * value.reshape(-1)))
        walk.append(trees)
    _WALKS[estimator] = (stages, walk)
    return walk
