"""Exact TreeSHAP (path-dependent: each tree's own covers stand for the data) through the
``shap`` library: scikit-learn's trees, forests, extra trees and histogram gradient boosting
as ``shap`` reads them; gradient boosting's per-class trees and a single tree's hard labels
as tree tables handed to the same algorithm.

``shap`` is imported on first use; its explainers are built once per fitted model and
output, and kept as long as the model lives.
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

from ensembles.explain.attribution import (
    Attribution,
    ExplainUnavailableError,
    FloatArray,
    Output,
)

_EXPLAINERS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def shap_module() -> Any:
    """``shap``, or the 501 that names the extra providing it."""
    try:
        import shap
    except ImportError:
        raise ExplainUnavailableError(
            "explanations need the optional 'explain' extra (the shap library): "
            "pip install 'ensemble-service[explain]'"
        ) from None
    return shap


def preload() -> None:
    """Import shap now if it is installed (a process that forks workers imports it once,
    ~2 s, instead of each worker's first explanation)."""
    with contextlib.suppress(ExplainUnavailableError):
        shap_module()


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
        return _run(estimator, output, Xt, lambda: estimator)
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


def _run(estimator: Any, key: str, Xt: NDArray[Any], model: Any) -> Attribution:
    explainer = _explainer(estimator, key, model)
    values = explainer.shap_values(np.asarray(Xt, dtype=np.float64), check_additivity=False)
    phi = np.stack(values, axis=-1) if isinstance(values, list) else np.asarray(values)
    if phi.ndim == 2:
        phi = phi[:, :, None]
    base = np.atleast_1d(np.asarray(explainer.expected_value, dtype=np.float64)).reshape(-1)
    return Attribution(base, np.ascontiguousarray(phi.transpose(0, 2, 1)), "tree_shap")


def _explainer(estimator: Any, key: str, model: Any) -> Any:
    with _LOCK:
        cached = _EXPLAINERS.setdefault(estimator, {}).get(key)
    if cached is None:
        cached = shap_module().TreeExplainer(model())
        with _LOCK:
            _EXPLAINERS[estimator][key] = cached
    return cached


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
