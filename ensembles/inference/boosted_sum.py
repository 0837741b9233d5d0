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
them (float32, C order; a float matrix of the fitted width is only cast and checked
finite, what the library's check does to it, without its ~0.2 ms of Python a part), the
init estimator's raw predictions, then for each stage and each of its trees
``raw[i, k] += learning_rate * value[leaf]``, in stage order, a product and a sum of
float64s exactly as the C loop makes them (the product depends on the leaf only, so it
is made once per tree and kept).  Only for dense rows and the kind whose compiled form
is ``boosting`` (scikit-learn's two gradient boosting classes, trees
of one output); anything else is left to the library (None).

The init estimator's raw predictions are one row repeated when it predicts one value for
every row (``init='zero'``, and the ``DummyClassifier`` or ``DummyRegressor`` the library
makes by default): they are worked out on one row once per model and kept.  The library
validated the rows twice more (the first tree's check, the dummy's) and made the same
row for every row, about 0.6 ms of CPU for a 5,000-row part, 5% of its walk.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.utils.validation import validate_data

from ensembles.catalog import kind_of

__all__ = ["boosted_raw"]

FloatArray = NDArray[np.float64]
# A fitted model's trees and their scaled leaf values, by model, with the ``estimators_``
# array they were read from (a refit makes a new one; the stored models never change).
_Walk = list[list[tuple[Any, FloatArray]]]
_WALKS: weakref.WeakKeyDictionary[Any, tuple[Any, _Walk]] = weakref.WeakKeyDictionary()
# A model's init raw predictions for one row (shape (1, trees per stage)) when they are
# the same for every row, by model, with the ``estimators_`` array of their fit.
_INITS: weakref.WeakKeyDictionary[Any, tuple[Any, FloatArray]] = weakref.WeakKeyDictionary()
# DummyClassifier's strategies whose probabilities are the same for every row
_CONSTANT_CLASS_PRIORS = frozenset({"prior", "most_frequent", "constant"})
# the row dtypes cast here without the library's check (see _rows)
_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))


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
    X = _rows(estimator, Xt)
    raw = _init_raw(estimator, X)
    for stage in walk:
        for k, (tree, scaled) in enumerate(stage):
            column = raw[:, k]
            np.add(column, scaled.take(tree.apply(X)), out=column)
    return raw


def _rows(estimator: Any, Xt: Any) -> NDArray[np.float32]:
    """``Xt`` validated as ``decision_function`` validates it.  A float matrix of the
    fitted width, for a model fitted without column names, is only cast to float32 in C
    order and checked finite, which is all the library's check does to it (its own costs
    ~0.2 ms of Python a part: tags, data frame probes); anything else, and rows that are
    not all finite, go through the library's check, which gives its error."""
    if (
        type(Xt) is np.ndarray
        and Xt.ndim == 2
        and Xt.dtype in _FLOATS
        and Xt.shape[0] > 0
        and Xt.shape[1] == getattr(estimator, "n_features_in_", None)
        and not hasattr(estimator, "feature_names_in_")
    ):
        with np.errstate(over="ignore"):  # the library's cast below warns, once
            X = np.asarray(Xt, dtype=np.float32, order="C")
        if np.isfinite(X).all():
            return X
    checked: NDArray[np.float32] = validate_data(
        estimator, Xt, dtype=np.float32, order="C", accept_sparse="csr", reset=False
    )
    return checked


def _init_raw(estimator: Any, X: NDArray[Any]) -> FloatArray:
    """``_raw_predict_init(X)`` (a new array): the kept row repeated when the init
    estimator predicts one value for every row, else the library's own call."""
    if not _one_init_for_all_rows(estimator.init_):
        return np.asarray(estimator._raw_predict_init(X), dtype=np.float64)
    stages = estimator.estimators_
    kept = _INITS.get(estimator)
    if kept is None or kept[0] is not stages:
        row = np.asarray(estimator._raw_predict_init(X[:1]), dtype=np.float64)
        kept = (stages, row)
        _INITS[estimator] = kept
    return np.repeat(kept[1], X.shape[0], axis=0)


def _one_init_for_all_rows(init: Any) -> bool:
    """Does the init estimator predict the same for every row (each row's raw prediction
    then is made of the same values by the same elementwise operations)?"""
    if isinstance(init, str):
        return init == "zero"
    if type(init) is DummyRegressor:  # mean, median, quantile, constant
        return True
    return type(init) is DummyClassifier and init.strategy in _CONSTANT_CLASS_PRIORS


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
