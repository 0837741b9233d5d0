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
# TreeSHAP steps (leaves x depth²) per call of the C code: ~10-20 ms on the development
# machine, the longest it holds the GIL (see calls()).
CALL_STEPS = 2e7
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
        missing = np.isnan(X)
        phi = np.zeros((X.shape[0], X.shape[1] + 1, self.values.shape[2]))
        for rows, trees in calls(self.tree_steps(), len(X)):
            self._shap(trees, X[rows], missing[rows], phi[rows])
        # The last column (the bias) is left out: only there do the calls' sums differ.
        contributions = np.ascontiguousarray(phi[:, :-1, :].transpose(0, 2, 1))
        return Attribution(self.expected_value.reshape(-1), contributions, "tree_shap")

    def tree_steps(self) -> NDArray[np.float64]:
        """Each tree's TreeSHAP steps for one row (about its splits x the depth²)."""
        splits = np.count_nonzero(self.children_left >= 0, axis=1)
        steps: NDArray[np.float64] = (splits + 1).astype(np.float64) * max(self.max_depth, 1) ** 2
        return steps

    def _shap(
        self, trees: slice, X: NDArray[Any], missing: NDArray[np.bool_], phi: NDArray[np.float64]
    ) -> None:
        """shap's TreeSHAP of ``trees`` on the rows X, added to their ``phi``."""
        extension().dense_tree_shap(
            self.children_left[trees],
            self.children_right[trees],
            self.children_default[trees],
            self.features[trees],
            self.thresholds[trees],
            np.zeros(self.thresholds[trees].shape, dtype=np.int32),  # numeric splits only
            self.values[trees],
            self.node_sample_weight[trees],
            self.max_depth,
            X,
            missing,
            None,
            None,
            None,
            len(self.values[trees]),
            self.base_offset,
            phi,
            _TREE_PATH_DEPENDENT,
            _IDENTITY,
            False,
        )


def calls(tree_steps: NDArray[np.float64], n_rows: int) -> list[tuple[slice, slice]]:
    """The rows and trees of each call of shap's TreeSHAP: at most ``CALL_STEPS`` steps
    a call (one row at least, one tree at least), in row order, then tree order.

    Rule: its C code holds the GIL for a whole call (a 100-tree forest grown on 200,000
    rows: ~0.3 s a row), so that a summary's rows in one call stopped every other thread
    of the job needing the GIL for seconds (the engine verdict's GTIL call waited for the
    summary to end); between calls, others take it.  Each row's contributions are its
    own, summed tree by tree in tree order into the row's columns, and calls add to
    those columns in the same order: the same bits (but for the bias column, which is
    not kept: each call adds the base offset to it).
    """
    per_row = float(tree_steps.sum())
    if per_row * n_rows <= CALL_STEPS or n_rows == 0:
        return [(slice(0, n_rows), slice(0, len(tree_steps)))]
    if per_row <= CALL_STEPS:
        step = max(1, int(CALL_STEPS // per_row))
        return [(slice(r, r + step), slice(0, len(tree_steps))) for r in range(0, n_rows, step)]
    groups: list[slice] = []
    first, spent = 0, 0.0
    for i, steps in enumerate(tree_steps.tolist()):
        if spent and spent + steps > CALL_STEPS:
            groups.append(slice(first, i))
            first, spent = i, 0.0
        spent += steps
    groups.append(slice(first, len(tree_steps)))
    return [(slice(r, r + 1), trees) for r in range(n_rows) for trees in groups]


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
