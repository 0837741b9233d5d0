"""Exact TreeSHAP (path-dependent) by shap's compiled algorithm, called without ``import
shap``: ``import shap`` imports numba, and with it LLVM (168 MB of the Docker image), for
code the service never runs. The algorithm is shap's C extension ``shap._cext``; this
module loads that one file from the installed distribution (the ``explain`` extra, whose
pin keeps the extension's calling convention) and hands it dense tree tables, as shap's
``TreeExplainer`` does for a model whose trees it reads itself.

A model is given as shap's dict of tree tables, ``{"trees": [...], "base_offset": ...,
"input_dtype": ...}``; each tree holds ``children_left``, ``children_right``,
``children_default``, ``features``, ``thresholds``, ``values`` (nodes x outputs) and
``node_sample_weight``.  Inner nodes' values are recomputed as the cover-weighted mean of
their children (the expectation TreeSHAP conditions on), as shap does.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensembles.explain.attribution import Attribution, ExplainUnavailableError

_TREE_PATH_DEPENDENT = 1  # shap's feature_perturbation code
_IDENTITY = 0  # shap's output transform code: raw tree sums
_LOCK = threading.Lock()
_LOADED: list[Any] = []

UNAVAILABLE = (
    "explanations need the optional 'explain' extra (the shap library): "
    "pip install 'ensemble-service[explain]'"
)


def extension() -> Any:
    """shap's compiled TreeSHAP, loaded once, or the 501 that names the extra providing it."""
    with _LOCK:
        if not _LOADED:
            _LOADED.append(_load())
        return _LOADED[0]


def _load() -> Any:
    imported = sys.modules.get("shap._cext")
    if imported is not None:  # shap itself was imported (a notebook, the tests)
        return imported
    # A top-level name is found without being imported (None where imports of shap are
    # blocked); "shap._cext" would import shap/__init__.py first.
    package = importlib.util.find_spec("shap")
    locations = [] if package is None else list(package.submodule_search_locations or [])
    loader = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    for location in locations:
        spec = importlib.machinery.FileFinder(location, loader).find_spec("shap._cext")
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise ExplainUnavailableError(UNAVAILABLE)


@dataclass(frozen=True)
class DenseTrees:
    """A sum of trees as the C algorithm reads it: one row per tree, padded with -1."""

    children_left: NDArray[np.int32]
    children_right: NDArray[np.int32]
    children_default: NDArray[np.int32]
    features: NDArray[np.int32]
    thresholds: NDArray[np.float64]
    values: NDArray[np.float64]  # trees x nodes x outputs
    node_sample_weight: NDArray[np.float64]
    max_depth: int
    base_offset: NDArray[np.float64]
    input_dtype: Any

    @property
    def expected_value(self) -> NDArray[np.float64]:
        """Each output's mean over the covers: the trees' root values plus the offset."""
        return np.asarray(self.values[:, 0].sum(0) + self.base_offset, dtype=np.float64)

    def attribution(self, Xt: NDArray[Any]) -> Attribution:
        # The input type the model compares in (scikit-learn's trees: float32), as shap.
        X = np.asarray(Xt, dtype=np.float64).astype(self.input_dtype)
        phi = np.zeros((X.shape[0], X.shape[1] + 1, self.values.shape[2]))
        extension().dense_tree_shap(
            self.children_left,
            self.children_right,
            self.children_default,
            self.features,
            self.thresholds,
            np.zeros(self.thresholds.shape, dtype=np.int32),  # numeric splits only
            self.values,
            self.node_sample_weight,
            self.max_depth,
            X,
            np.isnan(X),
            None,
            None,
            None,
            len(self.values),
            self.base_offset,
            phi,
            _TREE_PATH_DEPENDENT,
            _IDENTITY,
            False,
        )
        contributions = np.ascontiguousarray(phi[:, :-1, :].transpose(0, 2, 1))
        return Attribution(self.expected_value.reshape(-1), contributions, "tree_shap")


def dense(model: dict[str, Any]) -> DenseTrees:
    """shap's dict of tree tables as the dense arrays its C algorithm reads."""
    trees = [_expected(tree) for tree in model["trees"]]
    n_trees, n_nodes = len(trees), max(len(t["values"]) for t in trees)
    n_outputs = trees[0]["values"].shape[1]
    arrays = {
        name: np.full((n_trees, n_nodes), -1, dtype=np.int32)
        for name in ("children_left", "children_right", "children_default", "features")
    }
    thresholds = np.zeros((n_trees, n_nodes))
    weights = np.zeros((n_trees, n_nodes))
    values = np.zeros((n_trees, n_nodes, n_outputs))
    for i, tree in enumerate(trees):
        size = len(tree["values"])
        for name, array in arrays.items():
            array[i, :size] = tree[name]
        thresholds[i, :size] = tree["thresholds"]
        weights[i, :size] = tree["node_sample_weight"]
        values[i, :size] = tree["values"]
    offset = np.asarray(model.get("base_offset", 0.0), dtype=np.float64).reshape(-1)
    return DenseTrees(
        **arrays,
        thresholds=thresholds,
        values=values,
        node_sample_weight=weights,
        max_depth=max(t["max_depth"] for t in trees),
        base_offset=np.broadcast_to(offset, (n_outputs,)).copy(),
        input_dtype=model.get("input_dtype", np.float64),
    )


def _expected(tree: dict[str, Any]) -> dict[str, Any]:
    """One tree's arrays in the C types, inner values as expectations, and its depth."""
    left = np.ascontiguousarray(tree["children_left"], dtype=np.int32)
    right = np.ascontiguousarray(tree["children_right"], dtype=np.int32)
    weight = np.ascontiguousarray(tree["node_sample_weight"], dtype=np.float64)
    values = np.array(tree["values"], dtype=np.float64, order="C")  # a copy: filled in place
    depth = int(extension().compute_expectations(left, right, weight, values))
    return {
        "children_left": left,
        "children_right": right,
        "children_default": np.asarray(tree["children_default"], dtype=np.int32),
        "features": np.asarray(tree["features"], dtype=np.int32),
        "thresholds": np.asarray(tree["thresholds"], dtype=np.float64),
        "values": values,
        "node_sample_weight": weight,
        "max_depth": depth,
    }
