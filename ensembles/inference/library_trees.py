"""XGBoost and LightGBM boosters for the tree engine: treelite reads them, and the answers
are computed as each library computes its own (issue 22).

* LightGBM keeps float64 thresholds and leaves and sums its trees in float64: GTIL's raw
  margins are its own, and its links (sigmoid, softmax, exp) are applied here in float64
  as for scikit-learn's boosting.
* XGBoost compares ``float32(x) < threshold`` and adds its float32 leaves one tree after
  another to a float32 base margin, then applies ``expf``-based links in float32.  GTIL's
  own float32 sum is in another order (differences of a few float32 ulps, far above the
  1e-9 rule), so the trees' scores are read one by one (``score_per_tree``) and summed
  here in XGBoost's order.  The base margin of ``binary:logistic`` is ``-logf(1/p - 1)``
  in float32 (treelite's, computed in float64, is an ulp off); ``expf`` is the C
  library's, which numpy's float32 ``exp`` is not, so it is computed in float64 and only
  values within 1% of an ulp of a float32 rounding midpoint ask the C library itself.
* LightGBM's categorical splits route every code as LightGBM does (codes it never saw,
  NaN, beyond int32 alike) but for values in (-1, 0), which LightGBM truncates to
  category 0 and treelite reads as negative: those are made 0 first.  XGBoost's
  categorical models are refused by treelite's importer and answered by XGBoost.

Imports are kept per fitted estimator (weakly), so planning and importing read the
booster once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import treelite
import treelite.gtil
from numpy.typing import NDArray

from ensembles.inference.gtil_call import predict_direct

__all__ = [
    "Imported",
    "LibraryRoute",
    "Sum32",
    "expf",
    "expit32",
    "imported",
    "margins32",
    "softmax32",
    "split_nodes",
    "trees_of",
]

LibraryRoute = Literal["xgboost", "lightgbm"]
FloatArray = NDArray[np.float64]
Float32Array = NDArray[np.float32]

# XGBoost objectives whose margin is the answer (regression) or goes through a link here.
_XGBOOST_IDENTITY = frozenset(
    {"reg:squarederror", "reg:absoluteerror", "reg:pseudohubererror", "reg:quantileerror"}
)
_XGBOOST_LINKS = {"binary:logistic": "expit32", "multi:softprob": "softmax32"}
# treelite's postprocessor for a LightGBM model -> the link applied here.
_LIGHTGBM_LINKS = {
    "identity": "identity",
    "sigmoid": "expit",
    "softmax": "softmax",
    "exponential": "exp",
}


@dataclass(frozen=True)
class Sum32:
    """XGBoost's float32 margins: per output column, its base margin and its trees in order."""

    base: tuple[float, ...]  # float32 values
    trees: tuple[tuple[int, ...], ...]
    # The trees column after column, as one index array, when every column has as many
    # (XGBoost grows one per class per round); else None.
    grouped: NDArray[np.intp] | None = field(default=None, compare=False)
    # ``grouped`` is 0, 1, 2, ... (one column: a binary model or a regressor), so the
    # per-tree scores are already in order and are not gathered (a one-row request).
    in_order: bool = field(default=False, compare=False)


def _sum32(base: Float32Array, trees: tuple[tuple[int, ...], ...]) -> Sum32:
    grouped = (
        np.asarray(trees, dtype=np.intp).ravel() if len({len(t) for t in trees}) == 1 else None
    )
    in_order = grouped is not None and np.array_equal(grouped, np.arange(grouped.size))
    return Sum32(tuple(float(b) for b in base), trees, grouped, bool(in_order))


@dataclass(frozen=True, eq=False)
class Imported:
    """A booster read by treelite, with what the plan needs from it."""

    model: Any  # treelite.Model
    link: str | None  # the link named for the plan, None: refused (see ``reason``)
    reason: str | None
    n_columns: int  # output columns: classes of a multiclass model, else 1
    sum32: Sum32 | None  # XGBoost only
    categorical: tuple[int, ...] = ()  # LightGBM's columns with categorical splits
    # LightGBM's trees as the probes walk them, read once at import (the categorical
    # columns come from them); None: read when asked (:func:`trees_of`).
    trees: tuple[SplitNodes, ...] | None = None


_IMPORTED: weakref.WeakKeyDictionary[Any, Imported] = weakref.WeakKeyDictionary()


def imported(estimator: Any, route: LibraryRoute) -> Imported:
    """The estimator's booster read by treelite (raises treelite's or the library's errors)."""
    found = _IMPORTED.get(estimator)
    if found is None:
        found = _import_xgboost(estimator) if route == "xgboost" else _import_lightgbm(estimator)
        _IMPORTED[estimator] = found
    return found


def _header(model: Any) -> dict[str, Any]:
    accessor = model.get_header_accessor()
    names = ("num_class", "num_target", "leaf_vector_shape", "class_id", "postprocessor")
    fields = {name: accessor.get_field(name) for name in names}
    fields["base_scores"] = np.asarray(accessor.get_field("base_scores"), dtype=np.float64)
    fields["sigmoid_alpha"] = float(np.asarray(accessor.get_field("sigmoid_alpha"))[0])
    return fields


def _shape_refusal(header: dict[str, Any]) -> str | None:
    if int(np.asarray(header["num_target"])[0]) != 1:
        return "models with several targets are not compiled"
    if list(np.asarray(header["leaf_vector_shape"])) != [1, 1]:
        return "trees with vector leaves are not compiled"
    return None


def _import_xgboost(estimator: Any) -> Imported:
    booster = estimator.get_booster()
    best = getattr(estimator, "best_iteration", None)  # early stopping: predict stops there
    if best is not None:
        booster = booster[: int(best) + 1]
    model = treelite.frontend.from_xgboost(booster)
    header = _header(model)
    config = json.loads(booster.save_config())["learner"]
    objective = str(config["objective"]["name"])
    n_columns = int(np.asarray(header["num_class"])[0])
    reason = _shape_refusal(header)
    link = "identity" if objective in _XGBOOST_IDENTITY else _XGBOOST_LINKS.get(objective)
    if reason is None and link is None:
        reason = f"XGBoost's objective {objective!r} is not compiled"
    base = np.asarray(header["base_scores"], dtype=np.float32)[:n_columns]
    if objective == "binary:logistic":
        base = _logistic_base(config["learner_model_param"]["base_score"])
    class_id = np.asarray(header["class_id"], dtype=np.intp)
    trees = tuple(tuple(np.flatnonzero(class_id == c).tolist()) for c in range(n_columns))
    sum32 = _sum32(np.resize(base, n_columns), trees)
    return Imported(model, None if reason else link, reason, n_columns, sum32)


def _logistic_base(text: str) -> Float32Array:
    """XGBoost's base margin of ``binary:logistic``: ``-logf(1.0f / p - 1.0f)``."""
    p = np.float32(float(str(text).strip("[]").split(",")[0]))
    inner = np.float32(np.float32(1.0) / p) - np.float32(1.0)
    return np.asarray([-_logf(float(inner))], dtype=np.float32)


def _import_lightgbm(estimator: Any) -> Imported:
    model = treelite.frontend.from_lightgbm(estimator.booster_)
    header = _header(model)
    n_columns = int(np.asarray(header["num_class"])[0])
    reason = _shape_refusal(header)
    postprocessor = str(header["postprocessor"])
    link = _LIGHTGBM_LINKS.get(postprocessor)
    if reason is None and link is None:
        reason = f"LightGBM's output transform {postprocessor!r} is not compiled"
    if reason is None and link == "expit" and header["sigmoid_alpha"] != 1.0:
        reason = "LightGBM's sigmoid with a scale other than 1 is not compiled"
    trees = tuple(split_nodes(model))
    categorical = _categorical_columns(trees)
    return Imported(model, None if reason else link, reason, n_columns, None, categorical, trees)


def _categorical_columns(trees: tuple[SplitNodes, ...]) -> tuple[int, ...]:
    found = {int(t.feature[i]) for t in trees for i in np.flatnonzero(t.categorical)}
    return tuple(sorted(found))


def trees_of(found: Imported) -> list[SplitNodes]:
    """The imported model's trees for the probes: as read at import (LightGBM), else now."""
    return list(found.trees) if found.trees is not None else split_nodes(found.model)


# --- evaluating -------------------------------------------------------------------------


def _per_tree_config() -> Any:
    config = getattr(getattr(treelite.gtil, "gtil", None), "GTILConfig", None)
    return None if config is None else config(nthread=1, predict_type="score_per_tree")


_PER_TREE = _per_tree_config()


def margins32(model: Any, X: FloatArray, sum32: Sum32) -> FloatArray:
    """XGBoost's float32 margins (as float64 values): base, then each tree in order.

    The per-tree scores come from GTIL's C function called directly
    (:func:`ensembles.inference.gtil_call.predict_direct`, the forests' way): treelite's
    ``_predict_impl`` asked the library for the model's types, feature count and output
    shape on every call, about as long as one row's 100 trees (issue 22: XGBoost's
    one-row p50 0.51 ms against the forest's 0.40)."""
    impl = getattr(getattr(treelite.gtil, "gtil", None), "_predict_impl", None)
    if impl is None or _PER_TREE is None:
        per = treelite.gtil.predict_per_tree(model, X, nthread=1)
    else:
        per = predict_direct(model, X, _PER_TREE, impl)
    scores = np.asarray(per, dtype=np.float32).reshape(X.shape[0], -1)
    n, k = X.shape[0], len(sum32.trees)
    grouped = sum32.grouped
    if grouped is not None:  # one accumulate over (row, column, base + its trees)
        terms = np.empty((n, k, grouped.size // k + 1), dtype=np.float32)
        terms[:, :, 0] = sum32.base
        in_order = scores if sum32.in_order else scores[:, grouped]
        terms[:, :, 1:] = in_order.reshape(n, k, -1)
        return np.add.accumulate(terms, axis=2)[:, :, -1].astype(np.float64)
    out = np.empty((n, k), dtype=np.float64)
    for column, (base, trees) in enumerate(zip(sum32.base, sum32.trees, strict=True)):
        start = np.full((X.shape[0], 1), base, dtype=np.float32)
        terms = np.hstack([start, scores[:, list(trees)]])
        out[:, column] = np.add.accumulate(terms, axis=1, dtype=np.float32)[:, -1]
    return out


def _libm() -> Any:
    name = ctypes.util.find_library("m")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    for fn in (lib.expf, lib.logf):
        fn.restype = ctypes.c_float
        fn.argtypes = [ctypes.c_float]
    return lib


_LIBM = _libm()
_FEW = 16  # values for which calling the C library directly is the faster way


def _logf(x: float) -> np.float32:
    return np.float32(_LIBM.logf(x) if _LIBM is not None else np.log(np.float32(x)))


def expf(x: Float32Array) -> Float32Array:
    """The C library's ``expf`` of float32 values, elementwise."""
    if _LIBM is not None and x.size <= _FEW:  # a request of a row or two: call it
        return np.asarray([_LIBM.expf(v) for v in x.ravel().tolist()], np.float32).reshape(x.shape)
    wide = np.exp(x.astype(np.float64))
    out = wide.astype(np.float32)
    if _LIBM is None:
        return out
    with np.errstate(invalid="ignore", over="ignore"):
        frac = (wide - out.astype(np.float64)) / np.spacing(out).astype(np.float64)
    near = np.isfinite(frac) & (np.abs(np.abs(frac) - 0.5) < 0.01)
    for i in np.flatnonzero(near.ravel()).tolist():
        out.flat[i] = _LIBM.expf(float(x.flat[i]))
    return out


def expit32(margins: FloatArray) -> FloatArray:
    """XGBoost's ``binary:logistic`` probabilities ``[1 - p, p]``, ``p = 1 / (1 + expf(-x))``."""
    if margins.shape[0] == 1 and _LIBM is not None:
        return _expit32_row(float(margins[0, 0]))
    x = margins[:, 0].astype(np.float32)
    one = np.float32(1.0)
    p = one / (one + expf(-x))
    out = np.empty((x.shape[0], 2), dtype=np.float64)  # float32 values, written as float64
    out[:, 0] = one - p
    out[:, 1] = p
    return out


def _expit32_row(margin: float) -> FloatArray:
    """:func:`expit32` of one row in float32 scalars: the same IEEE float32 operations
    on the same values (a float32 scalar's ``+``, ``/`` and ``-`` round as the arrays'
    do; ``expf`` is the C library's either way), without the eight small arrays the
    vectorised way makes (issue 22: the link cost XGBoost's one-row answer 10 us
    against the forest's 1)."""
    one = np.float32(1.0)
    x = np.float32(margin)
    p = one / (one + np.float32(_LIBM.expf(float(-x))))
    return np.array([[float(one - p), float(p)]])


def softmax32(margins: FloatArray) -> FloatArray:
    """XGBoost's ``multi:softprob``: float32 ``expf(x - max)``, summed in float64 in order,
    each divided by the float32 sum."""
    x = margins.astype(np.float32)
    exps = expf(x - x.max(axis=1, keepdims=True))
    total = np.add.accumulate(exps.astype(np.float64), axis=1)[:, -1:].astype(np.float32)
    return (exps / total).astype(np.float64)


# --- the fidelity probes ----------------------------------------------------------------


@dataclass(frozen=True)
class SplitNodes:
    """One tree's split nodes in the arrays the fidelity probes walk: scikit-learn's
    ``tree_``, the histogram predictors, and the libraries' trees as treelite dumps them."""

    feature: NDArray[np.intp]
    threshold: FloatArray
    left: NDArray[np.intp]
    right: NDArray[np.intp]
    leaf: NDArray[np.bool_]
    categorical: NDArray[np.bool_]
    missing_left: NDArray[np.bool_]
    float32: bool = True  # compares float32(x) (scikit-learn's trees), else float64


def split_nodes(model: Any) -> list[SplitNodes]:
    """Every tree of a treelite model, for rows on its thresholds and missing values.

    Read from treelite's per-tree field arrays (under 0.1 s for 500 trees); its JSON
    dump, parsed node by node in Python, took 0.2-0.4 s for 500 LightGBM trees of 31
    leaves.  The dump stays the way when the accessor is missing or refuses a field, and
    for a model holding a number that is not finite (a LightGBM split on a column with
    missing values can have an infinite threshold): treelite writes it as nothing, which
    the JSON reader refuses (ValueError), and so such a model was, and still is, refused
    by the import with that error; lifting this is a decision of its own.
    """
    accessor = getattr(model, "get_tree_accessor", None)
    if accessor is None:
        return _dumped_nodes(model)
    try:
        read = [_accessed_nodes(accessor(i)) for i in range(int(model.num_tree))]
    except (treelite.TreeliteError, AttributeError, KeyError, ValueError):
        return _dumped_nodes(model)
    if not all(finite for _, finite in read):
        return _dumped_nodes(model)
    return [nodes for nodes, _ in read]


def _accessed_nodes(tree: Any) -> tuple[SplitNodes, bool]:
    """One tree from its field arrays, as :func:`_tree_nodes` reads it from the JSON dump
    (leaves: feature 0, children -1, threshold 0, not missing-left; categorical splits:
    threshold 0), and whether the dump could write every number of it."""
    node_type = np.asarray(tree.get_field("node_type"))
    leaf = node_type == _LEAF_NODE
    categorical = node_type == _CATEGORICAL_NODE
    raw_threshold = np.asarray(tree.get_field("threshold"))
    threshold = np.where(leaf | categorical, 0.0, raw_threshold.astype(np.float64))
    feature = np.where(leaf, 0, np.asarray(tree.get_field("split_index"))).astype(np.intp)
    left = np.where(leaf, -1, np.asarray(tree.get_field("cleft"))).astype(np.intp)
    right = np.where(leaf, -1, np.asarray(tree.get_field("cright"))).astype(np.intp)
    missing_left = ~leaf & (np.asarray(tree.get_field("default_left")) != 0)
    float32 = raw_threshold.dtype == np.float32
    nodes = SplitNodes(feature, threshold, left, right, leaf, categorical, missing_left, float32)
    return nodes, _writable(tree, raw_threshold[node_type == _NUMERICAL_NODE], leaf)


_LEAF_NODE, _NUMERICAL_NODE, _CATEGORICAL_NODE = 0, 1, 2  # treelite's TreeNodeType


def _writable(tree: Any, thresholds: NDArray[Any], leaf: NDArray[np.bool_]) -> bool:
    """Are the numbers treelite's JSON dump writes of this tree all finite?"""
    values = [thresholds, np.asarray(tree.get_field("leaf_value"))[leaf]]
    values.append(np.asarray(tree.get_field("leaf_vector")))
    for name in ("gain", "sum_hess"):
        field, present = np.asarray(tree.get_field(name)), tree.get_field(f"{name}_present")
        if field.size:
            values.append(field[np.asarray(present) != 0])
    return all(bool(np.isfinite(v).all()) for v in values)


def _dumped_nodes(model: Any) -> list[SplitNodes]:
    dumped = json.loads(model.dump_as_json(pretty_print=False))
    float32 = dumped.get("threshold_type") == "float32"
    return [_tree_nodes(tree["nodes"], float32) for tree in dumped["trees"]]


def _tree_nodes(nodes: list[dict[str, Any]], float32: bool) -> SplitNodes:
    n = max(int(node["node_id"]) for node in nodes) + 1
    feature = np.zeros(n, dtype=np.intp)
    threshold = np.zeros(n)
    left = np.full(n, -1, dtype=np.intp)
    right = np.full(n, -1, dtype=np.intp)
    leaf = np.ones(n, dtype=bool)
    categorical = np.zeros(n, dtype=bool)
    missing_left = np.zeros(n, dtype=bool)
    for node in nodes:
        i = int(node["node_id"])
        if "left_child" not in node:
            continue
        leaf[i] = False
        feature[i] = int(node["split_feature_id"])
        threshold[i] = float(node.get("threshold", 0.0))
        left[i], right[i] = int(node["left_child"]), int(node["right_child"])
        categorical[i] = node.get("node_type") == "categorical_test_node"
        missing_left[i] = bool(node.get("default_left", False))
    return SplitNodes(feature, threshold, left, right, leaf, categorical, missing_left, float32)
