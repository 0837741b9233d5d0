"""Exact TreeSHAP (path-dependent: each tree's own covers stand for the data) of
scikit-learn's trees, forests, extra trees and histogram gradient boosting, read into tree
tables here as shap's ``TreeEnsemble`` reads them (its float32 inputs, normalised class
fractions, missing-value directions, offsets); gradient boosting's per-class trees and a
single tree's hard labels as tree tables of their own. The algorithm is shap's compiled
one (:mod:`ensembles.explain.treeshap`), called without ``import shap``, which would load
numba and LLVM for nothing.

The tables are built once per fitted model and output, and kept as long as the model lives.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import is_classifier

from ensembles.catalog import kind_of
from ensembles.explain.attribution import (
    Attribution,
    ExplainUnavailableError,
    FloatArray,
    Output,
)
from ensembles.explain.treeshap import DenseTrees, dense, extension

_DENSE: weakref.WeakKeyDictionary[Any, dict[str, DenseTrees]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
# How a kind holds its trees (its ``compiled`` trait, as the compiled engines read them):
# the layouts read here as shap's TreeEnsemble reads them.
_READ = frozenset({"tree", "forest", "boosting", "histogram"})


def preload() -> None:
    """Load the compiled TreeSHAP now if the extra is installed (a process that forks
    workers loads it once, instead of each worker's first explanation)."""
    with contextlib.suppress(ExplainUnavailableError):
        extension()


def native_output(estimator: Any, space: str) -> Output:
    """The output a tree model's own TreeSHAP explains: values, probabilities or margins."""
    if not is_classifier(estimator):
        return "value"
    return "proba" if space == "probability" else "margin"


def tree_attribution(
    estimator: Any, Xt: NDArray[Any], output: Output, space: str
) -> Attribution | None:
    """Exact TreeSHAP of ``output``, or None when that output is not a sum over trees."""
    if output == native_output(estimator, space):
        if hasattr(estimator, "estimators_") and output == "margin" and _staged(estimator):
            return _run(estimator, "boosted", Xt, lambda: _boosting_model(estimator, Xt))
        kind = kind_of(estimator)
        layout = None if kind is None else kind.compiled
        if layout not in _READ:
            return None
        return _run(estimator, output, Xt, lambda: _tables(estimator, layout))
    tree = getattr(estimator, "tree_", None)
    if output == "votes" and tree is not None:
        return _run(estimator, output, Xt, lambda: {"trees": [tree_table(tree, _one_hot(tree))]})
    return None


def tables_attribution(
    owner: Any, key: str, Xt: NDArray[Any], tables: Callable[[], dict[str, Any]]
) -> Attribution:
    """Exact TreeSHAP of a sum of trees given as shap tree tables (``{"trees": [...],
    "base_offset": ...}``, each from :func:`tree_table` with its leaf values, k outputs),
    built once per ``owner`` and ``key``: what a kind of its own made of scikit-learn trees
    with scores of its own in the leaves (AdaBoost.MH's confidence-rated stumps) declares."""
    return _run(owner, key, Xt, tables)


def _staged(estimator: Any) -> bool:
    """Gradient boosting's trees: a 2-d array of stages by class."""
    return np.ndim(estimator.estimators_) == 2


def _run(
    estimator: Any, key: str, Xt: NDArray[Any], model: Callable[[], dict[str, Any]]
) -> Attribution:
    with _LOCK:
        trees = _DENSE.setdefault(estimator, {}).get(key)
    if trees is None:
        trees = dense(model())
        with _LOCK:
            _DENSE[estimator][key] = trees
    return trees.attribution(Xt)


def _tables(estimator: Any, layout: str | None) -> dict[str, Any]:
    """The tree tables of a scikit-learn tree model of a layout in ``_READ``, as shap
    reads it (a single tree, a forest's mean, a regressor's boosting stages)."""
    if layout == "histogram":
        return _histogram_tables(estimator)
    offset = 0.0
    if layout == "tree":
        members, scaling = [estimator], 1.0
    elif layout == "forest":
        members, scaling = list(estimator.estimators_), 1.0 / len(estimator.estimators_)
    else:
        members, scaling = list(estimator.estimators_[:, 0]), float(estimator.learning_rate)
        offset = _init_offset(estimator)
    fractions = is_classifier(estimator)  # class fractions, however weighted
    trees = [_sklearn_table(member.tree_, fractions, scaling) for member in members]
    return {"trees": trees, "base_offset": offset, "input_dtype": np.float32}


def _sklearn_table(tree: Any, fractions: bool, scaling: float) -> dict[str, Any]:
    values = tree.value.reshape(tree.value.shape[0], tree.value.shape[1] * tree.value.shape[2])
    if fractions:
        values = (values.T / values.sum(1)).T
    left = tree.children_left
    return {
        "children_left": left,
        "children_right": tree.children_right,
        "children_default": np.where(tree.missing_go_to_left, left, tree.children_right),
        "features": tree.feature,
        "thresholds": tree.threshold,
        "values": values * scaling,
        "node_sample_weight": tree.weighted_n_node_samples,
    }


def _init_offset(estimator: Any) -> Any:
    """The raw score gradient boosting starts from: its init estimator's constant."""
    init = estimator.init_
    if hasattr(init, "constant_"):  # a DummyRegressor, the default
        return init.constant_[0]
    if isinstance(init, str) and init == "zero":
        return 0.0
    row = np.zeros((1, estimator.n_features_in_))
    summed = sum(
        float(estimator.learning_rate) * m.predict(row)[0] for m in estimator.estimators_[:, 0]
    )
    return float(estimator.predict(row)[0]) - summed


def _histogram_tables(estimator: Any) -> dict[str, Any]:
    """Histogram boosting's predictors, one per iteration and output, each tree in its
    own output; missing values go where the split sent them at training."""
    per_iteration = len(estimator._predictors[0])
    trees = []
    for predictors in estimator._predictors:
        for k, predictor in enumerate(predictors):
            nodes = predictor.nodes
            leaf = nodes["is_leaf"].astype(bool)
            left = np.where(leaf, -1, nodes["left"])
            right = np.where(leaf, -1, nodes["right"])
            values = np.zeros((len(nodes), per_iteration))
            values[:, k] = nodes["value"]
            trees.append(
                {
                    "children_left": left,
                    "children_right": right,
                    "children_default": np.where(nodes["missing_go_to_left"], left, right),
                    "features": np.where(leaf, -2, nodes["feature_idx"]),
                    "thresholds": nodes["num_threshold"],
                    "values": values,
                    "node_sample_weight": nodes["count"],
                }
            )
    offset = np.asarray(estimator._baseline_prediction, dtype=np.float64).reshape(-1)
    return {"trees": trees, "base_offset": offset, "input_dtype": np.float64}


def _boosting_model(estimator: Any, Xt: NDArray[Any]) -> dict[str, Any]:
    """Gradient boosting's stages as one multi-output tree table: class k's trees carry
    their values in output k (others 0), scaled by the learning rate, with the initial
    raw score as the offset (read back from one row, whatever the init estimator)."""
    stages = estimator.estimators_
    n_out = stages.shape[1]
    rate = float(estimator.learning_rate)
    trees = []
    for k in range(n_out):
        for member in stages[:, k]:
            leaf = np.zeros((member.tree_.node_count, n_out))
            leaf[:, k] = member.tree_.value[:, 0, 0] * rate
            trees.append(tree_table(member.tree_, leaf))
    row = np.asarray(Xt[:1], dtype=np.float64)
    raw = np.asarray(estimator.decision_function(row), dtype=np.float64).reshape(1, -1)[0]
    summed = np.array([[rate * m.predict(row)[0] for m in stages[:, k]] for k in range(n_out)])
    return {"trees": trees, "base_offset": raw - summed.sum(axis=1)}


def _one_hot(tree: Any) -> FloatArray:
    """Each node's label as a one-hot row: the first class of largest weight, as predict."""
    values = np.asarray(tree.value[:, 0, :], dtype=np.float64)
    out = np.zeros_like(values)
    out[np.arange(len(values)), values.argmax(axis=1)] = 1.0
    return out


def tree_table(tree: Any, leaf_values: FloatArray) -> dict[str, Any]:
    """A scikit-learn tree with the given leaf values as shap's tree table; inner nodes
    hold the cover-weighted mean of their leaves, which is what TreeSHAP expects."""
    left = np.asarray(tree.children_left, dtype=np.int32)
    right = np.asarray(tree.children_right, dtype=np.int32)
    weight = np.asarray(tree.weighted_n_node_samples, dtype=np.float64)
    values = np.array(leaf_values, dtype=np.float64)
    for node in range(len(left) - 1, -1, -1):  # children come after their parent
        if left[node] >= 0:
            a, b = left[node], right[node]
            values[node] = (weight[a] * values[a] + weight[b] * values[b]) / (weight[a] + weight[b])
    return {
        "children_left": left,
        "children_right": right,
        "children_default": left.copy(),
        "features": np.asarray(tree.feature, dtype=np.int32),
        "thresholds": np.asarray(tree.threshold, dtype=np.float64),
        "values": values,
        "node_sample_weight": weight,
    }
