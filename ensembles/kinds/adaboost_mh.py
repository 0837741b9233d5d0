"""AdaBoost.MH (Schapire & Singer 1999, "Improved boosting algorithms using
confidence-rated predictions"; BoosTexter, 2000), for any number of classes.

One weight D(i, l) per (row, class) pair, Y_il = +1 if row i is of class l, else -1;
D_1 uniform over the pairs (row weights, when given, spread over each row's classes).
Each round a tree of ``max_depth`` gives its leaf j the score per class
c_jl = 1/2 ln((W+_jl + eps) / (W-_jl + eps)), W±_jl the weight of the leaf's pairs with
Y_il = ±1, eps = 1/(n k) as the paper suggests.  Splits minimise
Z = 2 sum_j sum_l sqrt(W+_jl W-_jl): a stump exactly (every feature, every cut between
distinct values); a deeper tree greedily, node by node (Z is a sum over leaves and a split
never raises it), splitting while a node holds pairs of both signs of some class, even
when that level gains nothing (XOR pays off one level down).  h_t = learning_rate * c,
and D_{t+1}(i, l) = D_t(i, l) exp(-Y_il h_t(x_i, l)) / Z_t with Z_t the actual
normaliser, so the training Hamming loss (pairs with Y_il f(x_i, l) <= 0) never exceeds
prod Z_t (the paper's Theorem 1).

f(x, l) = sum_t h_t(x, l); the label is the first l maximising it.  Probabilities are
sigma(2 f(x, l)) normalised over the classes: AdaBoost.MH minimises the sum over classes
of exp(-Y_l f_l), whose minimiser is f_l = 1/2 ln(p_l / (1 - p_l)) (Friedman, Hastie &
Tibshirani 2000), so sigma(2 f_l) estimates p_l; a softmax of f has no such reading.  Two
classes: the scores are opposite and the two values already sum to one.

No scikit-learn class computes this, so this estimator is the artifact's last step; the
version's lineage names the ``ensemble-service`` distribution it loads with.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ensembles.kinds.base import Monitor, curve
from ensembles.science.hardest_rows import TOP_ROWS

__all__ = [
    "AdaBoostMHClassifier",
    "explanation",
    "fitted_curves",
    "hardest_rows",
    "row_weights",
    "shap_tables",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
_CHUNK_CELLS = 1 << 22  # rows x members walked at once when predicting
MAX_POINTS = 50  # points of a curve, as ensembles.science.curves draws them


@dataclass
class _Grown:
    """The nodes of all members, flat (a leaf points to itself: a walk of ``max_depth``
    steps always ends on a leaf)."""

    feature: list[int] = field(default_factory=list)
    threshold: list[float] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    right: list[int] = field(default_factory=list)
    value: list[FloatArray] = field(default_factory=list)
    cover: list[float] = field(default_factory=list)  # training rows reaching the node

    def add(self, k: int) -> int:
        self.feature.append(0)
        self.threshold.append(np.inf)
        self.left.append(len(self.left))
        self.right.append(len(self.right))
        self.value.append(np.zeros(k))
        self.cover.append(0.0)
        return len(self.feature) - 1


@dataclass(frozen=True)
class _Split:
    z: float  # the children's 2 sum sqrt(W+ W-)
    feature: int
    threshold: float


class _Round:
    """One weak learner fitted to the pair weights of one round."""

    def __init__(self, X: FloatArray, order: IntArray, pos: FloatArray, neg: FloatArray) -> None:
        self.X, self.order, self.pos, self.neg = X, order, pos, neg

    def best_split(self, rows: NDArray[np.bool_]) -> _Split | None:
        """The cut minimising the children's Z over every feature (the first on ties)."""
        best: _Split | None = None
        for j in range(self.X.shape[1]):
            ranked = self.order[:, j][rows[self.order[:, j]]]
            xs = self.X[ranked, j]
            cuts = np.flatnonzero(xs[:-1] < xs[1:])
            if cuts.size == 0:
                continue
            cum_pos = np.cumsum(self.pos[ranked], axis=0)
            cum_neg = np.cumsum(self.neg[ranked], axis=0)
            lp, ln_ = cum_pos[cuts], cum_neg[cuts]
            rp = np.clip(cum_pos[-1] - lp, 0, None)
            rn = np.clip(cum_neg[-1] - ln_, 0, None)
            z = 2 * (np.sqrt(lp * ln_).sum(axis=1) + np.sqrt(rp * rn).sum(axis=1))
            q = int(np.argmin(z))
            if best is None or z[q] < best.z:
                a, b = float(xs[cuts[q]]), float(xs[cuts[q] + 1])
                middle = a / 2 + b / 2
                best = _Split(float(z[q]), j, middle if a <= middle < b else a)
        return best

    def grow(
        self, nodes: _Grown, rows: NDArray[np.bool_], depth: int, eps: float, scale: float
    ) -> tuple[int, IntArray, FloatArray]:
        """Grow the member from ``rows``; its root, each row's leaf (-1 outside ``rows``)
        and the Z each feature's splits removed."""
        gains = np.zeros(self.X.shape[1])
        leaf_of = np.full(len(rows), -1, dtype=np.intp)
        root = self._grow(nodes, rows, depth, eps, scale, leaf_of, gains)
        return root, leaf_of, gains

    def _grow(
        self,
        nodes: _Grown,
        rows: NDArray[np.bool_],
        depth: int,
        eps: float,
        scale: float,
        leaf_of: IntArray,
        gains: FloatArray,
    ) -> int:
        node = nodes.add(self.pos.shape[1])
        nodes.cover[node] = float(rows.sum())
        w_pos, w_neg = self.pos[rows].sum(axis=0), self.neg[rows].sum(axis=0)
        own = 2 * float(np.sqrt(w_pos * w_neg).sum())
        # Every class pure (own 0) leaves nothing to lower; else the best cut, if any.
        split = self.best_split(rows) if depth > 0 and own > 0 else None
        if split is None:
            nodes.value[node] = scale * 0.5 * np.log((w_pos + eps) / (w_neg + eps))
            leaf_of[rows] = node
            return node
        gains[split.feature] += max(own - split.z, 0.0)  # never negative but for rounding
        goes_left = self.X[:, split.feature] <= split.threshold
        nodes.feature[node], nodes.threshold[node] = split.feature, split.threshold
        args = (depth - 1, eps, scale, leaf_of, gains)
        nodes.left[node] = self._grow(nodes, rows & goes_left, *args)
        nodes.right[node] = self._grow(nodes, rows & ~goes_left, *args)
        return node


class AdaBoostMHClassifier(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """AdaBoost.MH with confidence-rated trees (see the module's docstring).

    Fitted: ``classes_``; ``n_estimators_`` rounds; the members' nodes, flat
    (``tree_feature_``, ``tree_threshold_``, ``tree_left_``, ``tree_right_``,
    ``tree_value_``: a leaf's scores h per class, learning rate included; ``tree_cover_``:
    the training rows reaching each node, what TreeSHAP weighs paths by) and each
    member's ``roots_``; per round the normaliser ``normalizers_`` (Z_t) and the training
    Hamming loss ``train_hamming_loss_``; ``smoothing_`` (eps);
    ``feature_importances_``: the share of the criterion Z each feature's splits removed,
    over all rounds.
    """

    # Parameter bounds are the catalog's, checked before anything is built.
    _parameter_constraints: dict[str, list[Any]] = {}  # noqa: RUF012 (scikit-learn's shape)

    def __init__(
        self, n_estimators: int = 100, *, learning_rate: float = 1.0, max_depth: int = 1
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth

    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, monitor: Monitor | None = None
    ) -> AdaBoostMHClassifier:
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        n, k = len(codes), len(self.classes_)
        weights = _row_weights(sample_weight, n)
        signs = np.full((n, k), -1.0)
        signs[np.arange(n), codes] = 1.0
        start = np.repeat(weights[:, np.newaxis] / (weights.sum() * k), k, axis=1)
        self.smoothing_ = 1.0 / (n * k)
        self._boost(X, signs, start, monitor)
        return self

    def _boost(
        self, X: FloatArray, signs: FloatArray, start: FloatArray, monitor: Monitor | None
    ) -> None:
        total = int(self.n_estimators)
        order = np.argsort(X, axis=0, kind="stable").astype(np.intp)
        nodes, roots = _Grown(), []
        weights, scores = start, np.zeros_like(start)
        norms, losses, gains = [], [], np.zeros(X.shape[1])
        every = np.ones(len(X), dtype=bool)
        for t in range(total):
            if monitor is not None and monitor(t, total, "fitting"):
                break
            learner = _Round(X, order, weights * (signs > 0), weights * (signs < 0))
            root, leaf_of, gained = learner.grow(
                nodes, every, int(self.max_depth), self.smoothing_, float(self.learning_rate)
            )
            h = np.stack(nodes.value[root:])[leaf_of - root]  # this member's leaves
            moved = weights * np.exp(-signs * h)
            norm = float(moved.sum())
            weights = moved / norm
            scores += h
            roots.append(root)
            norms.append(norm)
            losses.append(float(start[signs * scores <= 0].sum()))
            gains += gained
        if monitor is not None:
            monitor(len(roots), total, "fitting")
        self.tree_feature_ = np.asarray(nodes.feature, dtype=np.intp)
        self.tree_threshold_ = np.asarray(nodes.threshold, dtype=np.float64)
        self.tree_left_ = np.asarray(nodes.left, dtype=np.intp)
        self.tree_right_ = np.asarray(nodes.right, dtype=np.intp)
        self.tree_value_ = np.stack(nodes.value) if nodes.value else np.zeros((0, signs.shape[1]))
        self.tree_cover_ = np.asarray(nodes.cover, dtype=np.float64)
        self.roots_ = np.asarray(roots, dtype=np.intp)
        self.n_estimators_ = len(roots)
        self.normalizers_ = np.asarray(norms)
        self.train_hamming_loss_ = np.asarray(losses)
        found = gains.sum()
        self.feature_importances_ = gains / found if found > 0 else gains

    # --- prediction ------------------------------------------------------------------

    def _leaves(self, X: FloatArray) -> IntArray:
        """Each row's leaf in each member, (n, members)."""
        n, members = X.shape[0], len(self.roots_)
        at = np.tile(self.roots_, (n, 1))
        rows = np.arange(n)[:, np.newaxis]
        for _ in range(int(self.max_depth)):
            x = X[rows, self.tree_feature_[at]]
            at = np.where(x <= self.tree_threshold_[at], self.tree_left_[at], self.tree_right_[at])
        return at.reshape(n, members)

    def staged_class_scores(self, X: Any) -> Iterator[FloatArray]:
        """f(x, l) after each round, (n, classes): summed in round order, as fitting did."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        k, members = len(self.classes_), len(self.roots_)
        step = max(1, _CHUNK_CELLS // max(members, 1))
        chunks = [self._leaves(X[i : i + step]) for i in range(0, len(X), step)]
        leaves = np.concatenate(chunks) if chunks else np.zeros((0, members), dtype=np.intp)
        scores = np.zeros((len(X), k))
        for t in range(members):
            scores = scores + self.tree_value_[leaves[:, t]]
            yield scores

    def class_scores(self, X: Any) -> FloatArray:
        """f(x, l) = sum_t h_t(x, l), (n, classes)."""
        last = np.zeros((len(X), len(self.classes_)))
        for last in self.staged_class_scores(X):  # noqa: B007 (the last one is f)
            pass
        return last

    def _decision(self, scores: FloatArray) -> FloatArray:
        # Two classes: one column, positive for classes_[1], as scikit-learn's classifiers.
        return scores[:, 1] - scores[:, 0] if scores.shape[1] == 2 else scores

    def _labels(self, scores: FloatArray) -> NDArray[Any]:
        return np.asarray(self.classes_.take(np.argmax(scores, axis=1), axis=0))

    def decision_function(self, X: Any) -> FloatArray:
        return self._decision(self.class_scores(X))

    def predict(self, X: Any) -> NDArray[Any]:
        return self._labels(self.class_scores(X))

    def predict_proba(self, X: Any) -> FloatArray:
        return probabilities(self.class_scores(X))

    def staged_decision_function(self, X: Any) -> Iterator[FloatArray]:
        for scores in self.staged_class_scores(X):
            yield self._decision(scores)

    def staged_predict(self, X: Any) -> Iterator[NDArray[Any]]:
        for scores in self.staged_class_scores(X):
            yield self._labels(scores)

    def staged_predict_proba(self, X: Any) -> Iterator[FloatArray]:
        for scores in self.staged_class_scores(X):
            yield probabilities(scores)


def _row_weights(sample_weight: Any, n: int) -> FloatArray:
    """The rows' weights (a bagging draw, AdaBoost's reweighting), 1 each by default."""
    if sample_weight is None:
        return np.ones(n)
    weights = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
    if weights.shape != (n,) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError(f"sample_weight must be {n} finite non-negative numbers")
    if not weights.sum() > 0:
        raise ValueError("sample weights must not all be zero")
    return weights


def probabilities(scores: FloatArray) -> FloatArray:
    """sigma(2 f) normalised over the classes, in logs (no overflow, no 0/0)."""
    logs = -np.logaddexp(0.0, -2.0 * scores)
    logs -= logs.max(axis=1, keepdims=True)
    out = np.exp(logs)
    return np.asarray(out / out.sum(axis=1, keepdims=True))


# --- what the catalog entry reads --------------------------------------------------------


def row_weights(model: AdaBoostMHClassifier, Xt: Any, y: Any) -> FloatArray:
    """Each training row's final weight summed over its classes: D_{T+1}(i, l) is
    D_1 exp(-Y_il f(x_i, l)) / prod Z_t (the normalised updates telescope), D_1 uniform."""
    scores = model.class_scores(Xt)
    codes = np.searchsorted(model.classes_, np.asarray(y))
    signs = np.full(scores.shape, -1.0)
    signs[np.arange(len(codes)), codes] = 1.0
    logs = -signs * scores
    pairs = np.exp(logs - logs.max())
    return np.asarray(pairs.sum(axis=1) / pairs.sum())


def hardest_rows(
    model: AdaBoostMHClassifier, Xt: Any, y: Any, positions: IntArray
) -> tuple[dict[str, Any] | None, str | None]:
    """The ``metrics.hardest_rows`` block: rows by final weight summed over classes."""
    final = row_weights(model, Xt, y)
    order = np.argsort(-final, kind="stable")[:TOP_ROWS]
    predicted = model.predict(np.asarray(Xt)[order])
    targets = np.asarray(y)
    rows = [
        {
            "row": int(positions[i]),
            "weight": float(final[i]),
            "target": _plain(targets[i]),
            "predicted": _plain(p),
        }
        for i, p in zip(order.tolist(), predicted, strict=True)
    ]
    return {
        "rows": rows,
        "weight_share": float(final[order].sum()),
        "uniform_share": len(order) / len(final),
        "n_rows": len(final),
        "n_members": int(model.n_estimators_),
        "weights": "each row's (row, class) pair weights summed over the classes",
    }, None


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def fitted_curves(model: AdaBoostMHClassifier) -> list[dict[str, Any]]:
    """The training Hamming loss per round and its bound prod Z_t (at most MAX_POINTS
    rounds, the last always among them)."""
    total = int(model.n_estimators_)
    if total == 0:
        return []
    marks = np.unique(np.ceil(np.linspace(1, total, min(total, MAX_POINTS))).astype(np.intp))
    bound = np.cumprod(model.normalizers_)
    x = marks.tolist()
    label = "Hamming loss (training pairs)"  # one panel: the loss under its bound
    return [
        curve(
            "train_hamming_loss", "members", x, label, model.train_hamming_loss_[marks - 1].tolist()
        ),
        curve("hamming_loss_bound", "members", x, label, bound[marks - 1].tolist()),
    ]


def shap_tables(model: AdaBoostMHClassifier) -> dict[str, Any]:
    """The members as shap tree tables whose outputs are the decision function's columns
    (two classes: f1 - f0), so exact TreeSHAP of their sum explains the margin."""
    k = len(model.classes_)
    value = model.tree_value_
    scores = value if k > 2 else (value[:, 1] - value[:, 0])[:, np.newaxis]
    ends = [*model.roots_.tolist(), len(model.tree_feature_)]
    trees = []
    for start, end in itertools.pairwise(ends):
        local = np.arange(end - start)
        leaf = model.tree_left_[start:end] == local + start  # a leaf points to itself
        left = np.where(leaf, -1, model.tree_left_[start:end] - start).astype(np.int32)
        right = np.where(leaf, -1, model.tree_right_[start:end] - start).astype(np.int32)
        cover = model.tree_cover_[start:end]
        values = scores[start:end].copy()
        for node in local[::-1]:  # children come after their parent: fill means bottom-up
            if not leaf[node]:
                a, b = left[node], right[node]
                values[node] = (cover[a] * values[a] + cover[b] * values[b]) / (cover[a] + cover[b])
        trees.append(
            {
                "children_left": left,
                "children_right": right,
                "children_default": left.copy(),
                "features": np.where(leaf, -2, model.tree_feature_[start:end]).astype(np.int32),
                "thresholds": model.tree_threshold_[start:end].astype(np.float64),
                "values": values,
                "node_sample_weight": cover,
            }
        )
    return {"trees": trees, "base_offset": 0.0}


def explanation(model: AdaBoostMHClassifier, Xt: Any, output: str) -> Any:
    """Exact TreeSHAP of the margin f (a sum of trees); other outputs (the probabilities
    sigma(2f) normalised) are not a sum of the members', so the caller samples them."""
    if output != "margin":
        return None
    from ensembles.explain.trees import tables_attribution  # the catalog imports this module

    return tables_attribution(model, "adaboost_mh", Xt, lambda: shap_tables(model))
