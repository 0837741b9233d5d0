"""The tree engine: treelite's GTIL walking scikit-learn's fitted trees, answering as it does.

One fitted tree model (a forest, extra trees, gradient boosting, histogram gradient
boosting, a single decision tree, or the trees of a bagging ensemble together) becomes a
treelite model plus a :class:`Plan`: how rows are prepared for it and how GTIL's raw
output becomes the estimator's own probabilities, values and labels.  Used for whole
ensembles by :mod:`ensembles.inference.compiled` and for the tree members of voting, stacking and
bagging by :mod:`ensembles.inference.composite`; exactness rules are described in the former.

Single decision trees, and the trees of a bagging ensemble with their feature subsets,
have no importer of their own: they are handed to treelite's random forest importer as a
forest (a forest's answer is the mean of its trees' answers, so a one-tree forest is the
tree, and a forest of a bagging's trees is the bagging's mean), with each tree's feature
indices mapped back to the original columns and its class columns placed where its
(possibly fewer) classes sit among the ensemble's.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal

import numpy as np
import treelite
import treelite.gtil
import treelite.sklearn
from numpy.typing import NDArray
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor  # built by import_trees
from threadpoolctl import ThreadpoolController

from ensembles.catalog import Compiled, kind_of
from ensembles.inference import library_trees
from ensembles.inference.gtil_call import predict_cells, predict_direct
from ensembles.inference.library_trees import Sum32
from ensembles.tasks import Task

__all__ = [
    "ENGINE",
    "IMPORT_ERRORS",
    "TIE_MARGIN",
    "Plan",
    "cast_rows",
    "compiled_as",
    "decide",
    "decide_row",
    "first_max",
    "first_max_row",
    "gtil_scores",
    "import_model",
    "import_trees",
    "link",
    "plan_for",
]

ENGINE = "treelite-gtil"
TIE_MARGIN = 1e-9
LIGHTGBM_ZERO = float(np.float32(1e-35))  # LightGBM's kZeroThreshold
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]

IMPORT_ERRORS = (treelite.TreeliteError, NotImplementedError, ValueError, TypeError)

Link = Literal["identity", "exp", "expit", "expit2", "softmax", "expit32", "softmax32"]
Decision = Literal["proba", "raw_ge", "raw_gt", "raw_argmax", "none"]


@dataclass(frozen=True)
class Plan:
    """How GTIL's output becomes the estimator's own answers."""

    float32: bool  # scikit-learn casts X to float32 before comparing
    margin: bool  # read raw scores and apply ``link`` here
    link: Link
    decision: Decision  # which scores the label is the (first) maximum of
    # Histogram boosting's categorical columns and their known codes: any other value is
    # unknown, which its own encoder turns into NaN (missing) and GTIL would not.
    categories: tuple[tuple[int, FloatArray], ...] = ()
    nan_routed: bool = False  # float32 rows keep NaN, which the trees route (XGBoost)
    sum32: Sum32 | None = None  # XGBoost: scores are its float32 sums of the trees
    # LightGBM reads |x| <= its kZeroThreshold (1e-35f) as 0 before comparing, and a
    # categorical column's value as int(x): (-1, 0) is category 0 (listed columns).
    tiny_as_zero: bool = False
    truncated: tuple[int, ...] = ()

    @property
    def routes_missing(self) -> bool:
        """Does the model route missing values itself (so the probes include them)?"""
        return self.nan_routed or not self.float32


def compiled_as(estimator: BaseEstimator) -> Compiled:
    """How the compiled engine takes this estimator, as its kind says."""
    kind = kind_of(estimator)
    return "none" if kind is None else kind.compiled


def plan_for(estimator: BaseEstimator, task: Task) -> Plan | str:
    """The plan for a supported kind, else the reason it is not compiled."""
    name = type(estimator).__name__
    classifier = task == "classification"
    if classifier != hasattr(estimator, "classes_"):
        return f"{name} does not match the task {task!r}"
    route = compiled_as(estimator)
    if route in ("forest", "tree"):
        if getattr(estimator, "n_outputs_", 1) != 1:
            return f"{name} with several outputs is not compiled"
        return Plan(True, False, "identity", "proba" if classifier else "none")
    n_classes = len(getattr(estimator, "classes_", ()))
    if route == "boosting":
        if not classifier:
            return Plan(True, True, "identity", "none")
        if n_classes > 2:
            return Plan(True, True, "softmax", "raw_argmax")
        link_name: Link = "expit2" if estimator.loss == "exponential" else "expit"
        return Plan(True, True, link_name, "raw_ge")
    if route in ("xgboost", "lightgbm"):
        return _library_plan(estimator, route, classifier)
    if route == "histogram":
        categories = _known_categories(estimator)
        if isinstance(categories, str):
            return categories
        if classifier:  # labels: raw > 0 (binary), first maximum of raw scores (multiclass)
            if n_classes > 2:
                return Plan(False, True, "softmax", "raw_argmax", categories)
            return Plan(False, True, "expit", "raw_gt", categories)
        if estimator.loss in ("poisson", "gamma"):
            return Plan(False, True, "exp", "none", categories)
        if estimator.loss in ("squared_error", "absolute_error", "quantile"):
            return Plan(False, True, "identity", "none", categories)
        return f"{name} with loss {estimator.loss!r} has no known inverse link"
    return f"{name} is not a tree ensemble the compiled engine supports"


def _library_plan(estimator: BaseEstimator, route: Compiled, classifier: bool) -> Plan | str:
    """XGBoost's and LightGBM's plans, from the booster treelite reads."""
    library: library_trees.LibraryRoute = "xgboost" if route == "xgboost" else "lightgbm"
    name = type(estimator).__name__
    try:
        found = library_trees.imported(estimator, library)
    except IMPORT_ERRORS as exc:
        return f"treelite cannot import {name}: {exc}"
    if found.link is None:
        return f"{name}: {found.reason}"
    decision: Decision = "proba" if classifier else "none"
    if classifier and found.link in ("identity", "exp"):
        return f"{name}: a classifier without probabilities is not compiled"
    chosen: Link = _LIBRARY_LINKS[found.link]
    if route == "xgboost":  # compares float32(x), sums in float32 (library_trees)
        return Plan(True, False, chosen, decision, nan_routed=True, sum32=found.sum32)
    return Plan(False, True, chosen, decision, tiny_as_zero=True, truncated=found.categorical)


_LIBRARY_LINKS: dict[str, Link] = {
    "identity": "identity",
    "exp": "exp",
    "expit": "expit",
    "softmax": "softmax",
    "expit32": "expit32",
    "softmax32": "softmax32",
}


def _known_categories(estimator: BaseEstimator) -> tuple[tuple[int, FloatArray], ...] | str:
    """Each categorical column's known codes, read from histogram boosting's own encoder.

    scikit-learn exposes only ``is_categorical_``; the codes live in the private
    ``_preprocessor`` (which treelite's importer reads too).  If it moves, the model is
    refused rather than guessed at.
    """
    is_categorical = getattr(estimator, "is_categorical_", None)
    if is_categorical is None or not np.any(is_categorical):
        return ()
    try:
        encoder = estimator._preprocessor.named_transformers_["encoder"]
        known = [np.asarray(c, dtype=np.float64) for c in encoder.categories_]
    except (AttributeError, KeyError, TypeError, ValueError):
        return "cannot read the known categories of this histogram gradient boosting"
    columns = np.flatnonzero(is_categorical).tolist()
    if len(columns) != len(known):
        return "its categorical columns and known categories do not line up"
    return tuple((j, codes[~np.isnan(codes)]) for j, codes in zip(columns, known, strict=True))


def import_model(estimator: BaseEstimator) -> Any:
    """The treelite model of a fitted estimator (raises one of ``IMPORT_ERRORS``)."""
    route = compiled_as(estimator)
    if route in ("xgboost", "lightgbm"):
        library: library_trees.LibraryRoute = "xgboost" if route == "xgboost" else "lightgbm"
        return library_trees.imported(estimator, library).model
    if route == "tree":
        n_classes = len(estimator.classes_) if hasattr(estimator, "classes_") else None
        return import_trees([(estimator, None)], int(estimator.n_features_in_), n_classes)
    source = estimator
    fitted = len(getattr(estimator, "estimators_", ()))
    if route in ("boosting", "forest") and fitted != estimator.n_estimators:
        # Early stopping (or a warm start) leaves fewer stages than n_estimators, which
        # treelite's importer reads: give it a shallow copy that says how many there are.
        source = copy.copy(estimator)
        source.n_estimators = fitted
    with warnings.catch_warnings():
        # treelite casts histogram boosting's category lists (NaN included) to int64.
        warnings.simplefilter("ignore", RuntimeWarning)
        return treelite.sklearn.import_model(source)


def import_trees(
    trees: Sequence[tuple[BaseEstimator, NDArray[Any] | None]],
    n_features: int,
    n_classes: int | None,
) -> Any:
    """One treelite forest of single decision trees, each with the columns it was fed.

    ``trees`` are (fitted tree, original column of each of its features, or None: all);
    ``n_classes`` is the number of classes of the whole ensemble (None: regression), whose
    encoded labels 0..n-1 the trees' ``classes_`` are.  GTIL then gives the mean over the
    trees of each tree's ``predict_proba`` / ``predict``, for rows of ``n_features`` columns.
    """
    classifier = n_classes is not None
    forest: BaseEstimator = (
        RandomForestClassifier(n_estimators=len(trees))
        if classifier
        else RandomForestRegressor(n_estimators=len(trees))
    )
    forest.estimators_ = [_as_tree(tree, features, n_classes) for tree, features in trees]
    forest.n_outputs_ = 1
    forest.n_features_in_ = n_features
    if classifier:
        forest.n_classes_ = n_classes
    return treelite.sklearn.import_model(forest)


def _as_tree(
    tree: BaseEstimator, features: NDArray[Any] | None, n_classes: int | None
) -> SimpleNamespace:
    """The ``tree_`` arrays treelite's importer reads, in the ensemble's columns and classes."""
    t = tree.tree_
    if getattr(tree, "n_outputs_", 1) != 1:
        raise ValueError("trees with several outputs are not compiled")
    feature = np.asarray(t.feature, dtype=np.int64)
    if features is not None:
        feature = feature.copy()
        split = feature >= 0
        feature[split] = np.asarray(features, dtype=np.int64)[feature[split]]
    value = np.asarray(t.value, dtype=np.float64)
    if n_classes is not None and value.shape[2] != n_classes:
        # A bagging member whose sample missed some classes: its classes_ are the encoded
        # labels (0..n-1) it saw, the columns its probabilities go to.
        classes = np.asarray(tree.classes_).astype(np.int64)
        full = np.zeros((value.shape[0], 1, n_classes))
        full[:, :, classes] = value[:, :, : len(classes)]
        value = full
    arrays = SimpleNamespace(
        node_count=int(t.node_count),
        children_left=np.asarray(t.children_left, dtype=np.int64),
        children_right=np.asarray(t.children_right, dtype=np.int64),
        feature=feature,
        threshold=np.asarray(t.threshold, dtype=np.float64),
        value=np.ascontiguousarray(value),
        missing_go_to_left=np.asarray(t.missing_go_to_left, dtype=np.uint8),
        n_node_samples=np.asarray(t.n_node_samples, dtype=np.int64),
        weighted_n_node_samples=np.asarray(t.weighted_n_node_samples, dtype=np.float64),
        impurity=np.asarray(t.impurity, dtype=np.float64),
    )
    return SimpleNamespace(tree_=arrays)


# --- evaluating -------------------------------------------------------------------------


def cast_rows(X: FloatArray, plan: Plan) -> FloatArray | None:
    """The rows GTIL must see to compare as scikit-learn does (None: it can't).

    scikit-learn's trees compare ``float32(x)``: a value beyond float32 becomes infinite,
    which scikit-learn refuses; histogram boosting compares float64 and routes NaN.
    """
    if plan.tiny_as_zero:
        out = np.where(np.abs(X) <= LIGHTGBM_ZERO, 0.0, X)  # NaN stays NaN
        if plan.truncated:
            columns = list(plan.truncated)
            codes = out[:, columns]
            out[:, columns] = np.where((codes > -1.0) & (codes < 0.0), 0.0, codes)
        return out
    if not plan.float32:
        return _unknown_as_missing(X, plan.categories)
    if X.size and np.abs(X).max() <= _FLOAT32_MAX:  # (NaN holds no bound)
        # Every value finite and within float32's range: the cast cannot overflow, so it
        # needs neither errstate (two seterr calls) nor the finiteness checks after it.
        return X.astype(np.float32).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        X32 = X.astype(np.float32)
    finite = ~np.isinf(X32) if plan.nan_routed else np.isfinite(X32)
    if not finite.all():
        return None
    return X32.astype(np.float64)


_FLOAT32_MAX = float(np.finfo(np.float32).max)  # the largest float64 a cast keeps finite


def _unknown_as_missing(
    X: FloatArray, categories: tuple[tuple[int, FloatArray], ...]
) -> FloatArray:
    """Codes a categorical column never had in training become NaN, as in scikit-learn."""
    if not categories:
        return np.ascontiguousarray(X)
    out = np.array(X, dtype=np.float64, order="C", copy=True)
    for j, known in categories:
        column = out[:, j]
        column[~np.isin(column, known) & ~np.isnan(column)] = np.nan
    return out


def gtil_scores(model: Any, X: FloatArray, plan: Plan, threads: int = 1) -> FloatArray:
    """GTIL's output, one row per row of X (raw margins when the plan applies the link);
    ``threads`` above one split the rows over GTIL's threads (a big check at training)."""
    if plan.sum32 is not None:
        return library_trees.margins32(model, X, plan.sum32)
    predict = _PREDICT_WITH_CONFIG
    if predict is None or threads > 1:
        threads = min(threads, openmp_threads())
        out = treelite.gtil.predict(model, X, nthread=threads, pred_margin=plan.margin)
    else:
        out = predict_direct(model, X, _CONFIGS[plan.margin], predict)
    return np.asarray(out, dtype=np.float64).reshape(X.shape[0], -1)


@functools.cache
def _openmp_libraries() -> ThreadpoolController:
    """The OpenMP runtimes loaded with treelite (its wheel bundles its own libgomp)."""
    return ThreadpoolController().select(user_api="openmp")


def openmp_threads() -> int:
    """The most threads GTIL accepts from this thread now.

    Rule: GTIL refuses an ``nthread`` above OpenMP's limit ("nthread cannot exceed 1
    (configured by OpenMP)"), which ``OMP_NUM_THREADS`` or a ``threadpool_limits`` sets.
    A service started with ``OMP_NUM_THREADS=1`` asked GTIL for the job's two threads in
    the engine check and had every tree model refused; rows split over fewer threads give
    the same answers, so the check asks for no more than the limit."""
    limits = [library.num_threads for library in _openmp_libraries().lib_controllers]
    return max(1, min(limits, default=1))


def _gtil_configs() -> tuple[Any, dict[bool, Any]]:
    """GTIL's predict with a configuration made once, and the two configurations.

    Rule: parse GTIL's configuration once, not per call: ``treelite.gtil.predict``
    rebuilds it (a JSON document parsed by the C library) on every call, a large share
    of a one-row call.  Figures: docs/performance.md.  The same call with a configuration
    built once is ``_predict_impl`` in the module behind it, which is private: if a
    treelite release moves it, the public function is used (same answers, tested both
    ways).  A configuration is read-only once parsed, so threads share it.
    """
    module = getattr(treelite.gtil, "gtil", None)
    predict = getattr(module, "_predict_impl", None)
    config = getattr(module, "GTILConfig", None)
    if predict is None or config is None:
        return None, {}
    try:
        configs = {
            margin: config(nthread=1, predict_type="raw" if margin else "default")
            for margin in (False, True)
        }
    except (TypeError, treelite.TreeliteError):
        return None, {}
    return predict, configs


_PREDICT_WITH_CONFIG, _CONFIGS = _gtil_configs()


def link(scores: FloatArray, plan: Plan) -> FloatArray:
    """Probabilities or values from GTIL's scores, by the estimator's own link."""
    name = plan.link
    if name == "identity":
        return scores
    if name == "exp":
        return np.exp(scores)
    if name == "expit32":
        return library_trees.expit32(scores)
    if name == "softmax32":
        return library_trees.softmax32(scores)
    if name == "softmax":
        shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
        return np.asarray(shifted / shifted.sum(axis=1, keepdims=True))
    if scores.shape[0] == 1:
        return _expit_row(float(scores[0, 0]), name == "expit2")
    p1 = np.asarray(expit(2.0 * scores[:, 0] if name == "expit2" else scores[:, 0]))
    return np.column_stack([1.0 - p1, p1])


def _expit_row(raw: float, doubled: bool) -> FloatArray:
    """:func:`link`'s ``[1 - p, p]`` of one row in Python floats, the same bits.

    scipy's ``expit`` of a float64 is ``1 / (1 + exp(-x))`` with the C library's ``exp``
    (its loop calls glibc's), which is also ``math.exp``'s; Python's float ``*``, ``+``,
    ``/`` and ``-`` are the IEEE double operations numpy's arrays do.  Where ``exp``
    overflows (``x`` below about -709.78), C gives infinity and ``math.exp`` raises, so
    infinity is put back: ``p`` is 0.0 as scipy's.  Equal to the array way on every
    value tried (``tests/unit/inference/test_one_row_link.py``: millions of random
    scores, random bit patterns, the overflow edges, infinities, NaN), and it skips the
    five small arrays of the array way (issue 22: 5 us of LightGBM's one-row answer,
    against the forest's 0.5)."""
    return np.array([expit_pair(raw, doubled)])


def expit_pair(raw: float, doubled: bool) -> list[float]:
    """:func:`_expit_row`'s ``[1 - p, p]`` as Python floats (the same bits: see there)."""
    x = 2.0 * raw if doubled else raw
    try:
        e = math.exp(-x)
    except OverflowError:
        e = math.inf
    p = 1.0 / (1.0 + e)
    return [1.0 - p, p]


def gtil_cells(model: Any, cells: tuple[float, ...], plan: Plan) -> list[float] | None:
    """:func:`gtil_scores` of one row given as Python numbers (finite, within float32's
    range) for a plan that casts to float32 and nothing else, GTIL called directly, as a
    flat list of Python floats (``gtil_call.predict_cells``); None: not covered, use
    :func:`gtil_scores` on the cast row."""
    if not plan.float32 or plan.tiny_as_zero or plan.sum32 is not None or plan.categories:
        return None
    if _PREDICT_WITH_CONFIG is None:
        return None
    return predict_cells(model, cells, _CONFIGS[plan.margin])


def decide(scores: FloatArray, plan: Plan) -> tuple[IntArray, BoolArray]:
    """Class index per row by the estimator's rule, and rows too close to call."""
    if plan.decision in ("raw_ge", "raw_gt"):
        raw = scores[:, 0]
        positive = raw >= 0 if plan.decision == "raw_ge" else raw > 0
        return positive.astype(np.intp), np.abs(raw) <= TIE_MARGIN
    return first_max(scores)


def decide_row(scores: list[float], plan: Plan) -> int | None:
    """:func:`decide` of one row's scores in Python floats: its class index, or None
    where :func:`decide` marks it too close to call or a score is NaN (the caller then
    takes the general way).  ``raw >= 0`` (``> 0``) and ``abs(raw) <= TIE_MARGIN`` are
    the IEEE comparisons numpy makes; the first maximum is :func:`first_max_row`'s."""
    if plan.decision in ("raw_ge", "raw_gt"):
        raw = scores[0]
        if raw != raw or abs(raw) <= TIE_MARGIN:
            return None
        return int(raw >= 0 if plan.decision == "raw_ge" else raw > 0)
    return first_max_row(scores, TIE_MARGIN)


def first_max(scores: FloatArray, margin: float = TIE_MARGIN) -> tuple[IntArray, BoolArray]:
    """The first maximum of each row, and rows whose top two are within ``margin``."""
    index = scores.argmax(axis=1)  # (np.argmax's wrapper calls this method)
    if scores.shape[1] < 2:
        return index, np.zeros(len(index), dtype=bool)
    if scores.shape[1] == 2:  # the top two are the two: max - min is |a - b|, to the bit
        return index, np.abs(scores[:, 1] - scores[:, 0]) <= margin
    top = np.partition(scores, -2, axis=1)
    return index, top[:, -1] - top[:, -2] <= margin


def first_max_row(scores: list[float], margin: float) -> int | None:
    """:func:`first_max` of one row in Python floats: the
    position of the first maximum, or None where that function marks the row too close
    to call (its top two within ``margin``) or where a score is NaN (left to it).

    The same decision: ``max`` keeps the first of equal values and ``index`` finds the
    first equal to it, as ``argmax`` (``-0.0 == 0.0`` both ways); the top two are the
    two largest values, whichever of equal ones ``partition`` puts first, and Python's
    float subtraction is the IEEE double one numpy does."""
    if any(map(math.isnan, scores)):  # (in C: a generator's frames cost more)
        return None
    top = max(scores)
    if len(scores) == 2:
        if abs(scores[1] - scores[0]) <= margin:
            return None
    elif len(scores) > 2:
        first, second = sorted(scores)[-2:][::-1]
        if first - second <= margin:
            return None
    return scores.index(top)
