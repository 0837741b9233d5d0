"""Does a compiled tree ensemble answer exactly as scikit-learn does?  Rows to ask, and the verdict.

The rule (issue 6): a compiled evaluator may serve a model only if, on the training rows and
on a fresh sample, its labels are identical to scikit-learn's and its probabilities or
regression values are within 1e-9 (absolute).  The fresh sample is made of

* rows resampled column by column from the training rows (combinations never seen);
* rows that reach a split node and sit exactly on its threshold, or on the nearest
  representable value either side of it (for scikit-learn's trees, the nearest float32
  values: they compare ``float32(x) <= threshold``);
* for histogram gradient boosting, rows with a missing value in each column and rows with
  a category never seen in training (its own missing-value and categorical routing).

Thresholds are read from the fitted trees: ``tree_`` for decision trees, forests and
gradient boosting; histogram gradient boosting keeps its nodes only in the private
``_predictors``, read here without changing anything (if it moves in a later scikit-learn,
those rows are simply not made and the rest of the check still runs).  In voting, stacking
and bagging ensembles, the trees of every member are read (nested ensembles too), a bagging
member's feature indices mapped back to the original columns it was given.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import treelite
from numpy.typing import NDArray
from sklearn.base import BaseEstimator

from ensembles.catalog import kind_of
from ensembles.inference import library_trees

__all__ = ["TOLERANCE", "FidelityReport", "compare", "probe_rows", "synthetic_rows"]

TOLERANCE = 1e-9
FloatArray = NDArray[np.float64]
_MAX_THRESHOLD_ROWS = 6000
_BASES_PER_TREE = 2


@dataclass(frozen=True)
class FidelityReport:
    """The verdict on one compiled model, kept in the version's metadata (``as_dict``)."""

    ok: bool
    engine: str | None  # the engine that serves the model, None: scikit-learn serves it
    reason: str | None  # why the compiled engine is not used (None when ok)
    max_abs_diff: float  # largest |compiled - scikit-learn| over the rows checked
    n_rows_checked: int
    compile_seconds: float  # building the engine's model from the fitted estimator
    check_seconds: float = 0.0  # the fidelity check (and calibration) on top
    crossover_rows: int = 0  # requests up to this many rows are faster compiled
    versions: str = ""  # library versions the verdict was reached with
    # Voting, stacking, bagging: each member (name, kind, engine, and the reason when
    # scikit-learn answers it although it could have been compiled); () for other kinds.
    members: tuple[dict[str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values (an infinite difference, from a shape mismatch, becomes None)."""
        out = asdict(self)
        out["max_abs_diff"] = self.max_abs_diff if np.isfinite(self.max_abs_diff) else None
        out["members"] = [dict(m) for m in self.members]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FidelityReport:
        """The report as ``as_dict`` gave it (older records lack the later fields)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if known.get("max_abs_diff") is None:
            known["max_abs_diff"] = float("inf")
        known["members"] = tuple(
            {str(k): str(v) for k, v in m.items()}
            for m in known.get("members") or ()
            if isinstance(m, dict)
        )
        return cls(**known)


# One tree's split nodes, as the probes walk them (scikit-learn trees, the histogram
# predictors and the libraries' boosters alike).
_Nodes = library_trees.SplitNodes


def _trees(estimator: BaseEstimator, columns: NDArray[np.intp] | None = None) -> list[_Nodes]:
    """Every tree of a tree model, or of every member of voting, stacking and bagging.

    ``columns``: the original column of each column the estimator was fed (a bagging
    member's subset), None when it was fed the original columns.
    """
    kind = kind_of(estimator)
    route = "none" if kind is None else kind.compiled
    if route in ("voting", "stacking"):
        members = [m for m in estimator.estimators_ if not isinstance(m, str)]
        return [t for m in members for t in _trees(m, columns)]
    if route in ("xgboost", "lightgbm"):
        return _library_trees(estimator, route, columns)
    if route == "bagging":
        out: list[_Nodes] = []
        for member, features in zip(
            estimator.estimators_, estimator.estimators_features_, strict=True
        ):
            subset = np.asarray(features, dtype=np.intp)
            out.extend(_trees(member, subset if columns is None else columns[subset]))
        return out
    trees = [_tree_nodes(estimator.tree_)] if hasattr(estimator, "tree_") else []
    fitted = getattr(estimator, "estimators_", None)
    for member in [] if fitted is None else np.asarray(fitted, dtype=object).ravel():
        tree = getattr(member, "tree_", None)
        if tree is not None:
            trees.append(_tree_nodes(tree))
    trees.extend(_histogram_trees(estimator))
    if columns is None:
        return trees
    return [_remapped(t, columns) for t in trees]


def _library_trees(
    estimator: BaseEstimator, route: str, columns: NDArray[np.intp] | None
) -> list[_Nodes]:
    """XGBoost's and LightGBM's trees as treelite read them (none if it cannot)."""
    library: library_trees.LibraryRoute = "xgboost" if route == "xgboost" else "lightgbm"
    try:
        found = library_trees.imported(estimator, library)
    except (treelite.TreeliteError, NotImplementedError, ValueError, TypeError):
        return []  # the import is refused with its reason where the model is compiled
    trees = library_trees.trees_of(found)
    return trees if columns is None else [_remapped(t, columns) for t in trees]


def _remapped(nodes: _Nodes, columns: NDArray[np.intp]) -> _Nodes:
    split = ~nodes.leaf
    feature = nodes.feature.copy()
    feature[split] = columns[feature[split]]
    return replace(nodes, feature=feature)


def _tree_nodes(tree: Any) -> _Nodes:
    left = np.asarray(tree.children_left, dtype=np.intp)
    return _Nodes(
        feature=np.asarray(tree.feature, dtype=np.intp),
        threshold=np.asarray(tree.threshold, dtype=np.float64),
        left=left,
        right=np.asarray(tree.children_right, dtype=np.intp),
        leaf=left == -1,
        categorical=np.zeros(len(left), dtype=bool),
        missing_left=np.asarray(tree.missing_go_to_left, dtype=bool),
    )


def _histogram_trees(estimator: BaseEstimator) -> list[_Nodes]:
    """The trees of a histogram gradient boosting (none for other estimators)."""
    out: list[_Nodes] = []
    # With categorical features, histogram boosting reorders its columns (categorical
    # first) before binning, and its nodes index that order.
    is_categorical = getattr(estimator, "is_categorical_", None)
    order = (
        None
        if is_categorical is None
        else np.concatenate([np.flatnonzero(is_categorical), np.flatnonzero(~is_categorical)])
    )
    for stage in getattr(estimator, "_predictors", None) or []:
        for predictor in stage:
            nodes = getattr(predictor, "nodes", None)
            if nodes is None:
                continue
            feature = np.asarray(nodes["feature_idx"], dtype=np.intp)
            out.append(
                _Nodes(
                    feature=feature if order is None else order[feature],
                    threshold=np.asarray(nodes["num_threshold"], dtype=np.float64),
                    left=np.asarray(nodes["left"], dtype=np.intp),
                    right=np.asarray(nodes["right"], dtype=np.intp),
                    leaf=np.asarray(nodes["is_leaf"], dtype=bool),
                    categorical=np.asarray(nodes["is_categorical"], dtype=bool),
                    missing_left=np.asarray(nodes["missing_go_to_left"], dtype=bool),
                    float32=False,
                )
            )
    return out


def _around(threshold: float, float32: bool) -> list[float]:
    """The threshold and the nearest values either side the comparison can see."""
    if not float32:
        return [threshold, np.nextafter(threshold, -np.inf), np.nextafter(threshold, np.inf)]
    t32 = np.float32(threshold)
    below = np.nextafter(t32, np.float32(-np.inf))
    above = np.nextafter(t32, np.float32(np.inf))
    return [threshold, float(below), float(t32), float(above)]


def _threshold_cells(
    trees: list[_Nodes], base: FloatArray, rng: np.random.Generator
) -> tuple[list[int], list[int], list[float]]:
    """(base row, column, value) so that the row reaches a node and sits on its threshold.

    A few base rows walk down each tree; at every numeric split on the way, a copy of the
    row with the split column set on (or next to) the threshold reaches that very node.
    Categorical splits stop the walk (their bitsets are probed by unseen categories).
    """
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    for nodes in trees:
        float32 = nodes.float32
        for b in rng.integers(0, len(base), size=_BASES_PER_TREE).tolist():
            x = base[b]
            node = 0
            while not nodes.leaf[node] and not nodes.categorical[node]:
                f, t = int(nodes.feature[node]), float(nodes.threshold[node])
                for v in _around(t, float32):
                    rows.append(b)
                    cols.append(f)
                    values.append(v)
                v = float(np.float32(x[f])) if float32 else float(x[f])
                go_left = nodes.missing_left[node] if np.isnan(v) else v <= t
                node = int(nodes.left[node] if go_left else nodes.right[node])
    return rows, cols, values


def probe_rows(
    estimator: BaseEstimator,
    Xt: FloatArray,
    *,
    rng: np.random.Generator,
    missing: bool = False,
    n_resampled: int = 2000,
    max_threshold_rows: int = _MAX_THRESHOLD_ROWS,
) -> FloatArray:
    """The fresh sample: resampled rows, rows on split thresholds (of every tree member),
    and with ``missing`` (histogram gradient boosting) missing and unseen-category probes."""
    n, d = Xt.shape
    picks = rng.integers(0, n, size=(n_resampled, d))
    resampled = Xt[picks, np.arange(d)]
    trees = _trees(estimator)
    rows, cols, values = _threshold_cells(trees, Xt, rng)
    if len(rows) > max_threshold_rows:
        keep = np.sort(rng.choice(len(rows), size=max_threshold_rows, replace=False))
        rows = [rows[i] for i in keep]
        cols = [cols[i] for i in keep]
        values = [values[i] for i in keep]
    on_thresholds = Xt[np.asarray(rows, dtype=np.intp)].copy()
    on_thresholds[np.arange(len(rows)), np.asarray(cols, dtype=np.intp)] = values
    parts = [resampled, on_thresholds]
    if missing:  # histogram gradient boosting: NaN is a value it routes itself
        parts.append(_missing_and_unseen(trees, resampled[: min(len(resampled), 20)]))
    return np.vstack(parts)


def synthetic_rows(estimator: BaseEstimator, n_rows: int, rng: np.random.Generator) -> FloatArray:
    """Rows without training data: each column drawn from the values its splits use.

    A column no split uses is 0.  Used to re-check an engine at load time.
    """
    d = int(estimator.n_features_in_)
    trees = _trees(estimator)
    out = np.zeros((n_rows, d))
    for j in range(d):
        seen = [t.threshold[(t.feature == j) & ~t.leaf & ~t.categorical] for t in trees]
        values = np.concatenate(seen) if seen else np.empty(0)
        if values.size:
            out[:, j] = rng.choice(values, size=n_rows)
    return out


def _missing_and_unseen(trees: list[_Nodes], base: FloatArray) -> FloatArray:
    """Each column missing (and zero: LightGBM may take zero as missing) in turn; each
    categorical column set to a never-seen code."""
    d = base.shape[1]
    parts = []
    for j in range(d):
        for value in (np.nan, 0.0):
            rows = base.copy()
            rows[:, j] = value
            parts.append(rows)
    categorical = {int(f) for t in trees for f in t.feature[t.categorical & ~t.leaf]}
    for j in sorted(categorical):
        finite = base[:, j][np.isfinite(base[:, j])]
        low, high = (finite.min(), finite.max()) if finite.size else (0.0, 0.0)
        for unseen in (high + 1.0, low + 0.5, -1.0, -0.5):
            rows = base.copy()
            rows[:, j] = unseen
            parts.append(rows)
    return np.vstack(parts) if parts else np.empty((0, d))


def compare(
    expected_values: FloatArray,
    values: FloatArray,
    what: str,
    expected_labels: NDArray[Any] | None = None,
    labels: NDArray[Any] | None = None,
) -> tuple[str | None, float]:
    """(reason or None, max |difference|) of compiled answers against scikit-learn's.

    ``values`` are class probabilities or regression values (``what`` names them);
    labels, when given, must be identical.
    """
    if expected_values.shape != values.shape:
        return f"{what} have shape {values.shape}, scikit-learn's {expected_values.shape}", np.inf
    nan_expected, nan_got = np.isnan(expected_values), np.isnan(values)
    if not np.array_equal(nan_expected, nan_got):
        return f"{what} are missing (NaN) where scikit-learn's are not, or the reverse", np.inf
    diff = np.abs(np.where(nan_expected, 0.0, expected_values - values))
    max_diff = float(diff.max()) if diff.size else 0.0
    if expected_labels is not None and labels is not None:
        mismatched = np.flatnonzero(np.asarray(expected_labels) != np.asarray(labels))
        if mismatched.size:
            i = int(mismatched[0])
            first = f"first at row {i}: scikit-learn {expected_labels[i]!r}, compiled {labels[i]!r}"
            return f"labels differ on {mismatched.size} of {len(labels)} rows ({first})", max_diff
    if max_diff > TOLERANCE:
        return f"{what} differ by up to {max_diff:.3g} (more than {TOLERANCE:g})", max_diff
    return None, max_diff
