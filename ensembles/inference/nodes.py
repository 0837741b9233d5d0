"""The evaluators of a composite: one node per estimator, answering as scikit-learn does.

Leaves answer on the rows they see: :class:`TreesNode` by treelite's GTIL, the numpy nodes
(:class:`LogisticNode`, :class:`NaiveBayesNode`, :class:`LinearNode`) by scikit-learn's own
formulas, :class:`SklearnNode` by the estimator itself.  Combining nodes reproduce their
estimator's arithmetic on their members' answers (:class:`VotingNode`,
:class:`BaggingNode`, :class:`StackingNode`).  Every answer comes with the rows that could
not be called exactly (a tie within ``TIE_MARGIN``): the caller asks scikit-learn for those.
How a node tree is built and checked: :mod:`ensembles.inference.composite`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit
from sklearn.base import BaseEstimator, is_classifier

from ensembles.inference.gtil import (
    TIE_MARGIN,
    Plan,
    cast_rows,
    decide,
    first_max,
    gtil_scores,
    link,
)
from ensembles.members import predicted_labels

__all__ = [
    "BaggingNode",
    "LinearNode",
    "LogisticNode",
    "NaiveBayesNode",
    "Node",
    "SklearnNode",
    "StackingNode",
    "TreesNode",
    "UnanswerableError",
    "VotingNode",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
Out = tuple[NDArray[Any], BoolArray]  # an output, and the rows too close to call
Both = tuple[NDArray[Any], FloatArray | None, BoolArray]  # labels, probabilities, unsure


class UnanswerableError(Exception):
    """The compiled path cannot answer these rows (values beyond float32): scikit-learn must."""


def _sure(n: int) -> BoolArray:
    return np.zeros(n, dtype=bool)


class Node:
    """One estimator of a composite, answering on the rows it sees as scikit-learn does.

    Methods mirror scikit-learn's: ``proba`` (predict_proba), ``decision``
    (decision_function), ``labels`` (a classifier's predict), ``values`` (a regressor's
    predict), ``both`` (labels and probabilities from one pass).  Each also returns the
    rows it could not call exactly.  ``approximate``: its numbers may differ from
    scikit-learn's in the last bits (labels never do, but for the rows returned as unsure).
    """

    approximate = False

    def __init__(self, estimator: BaseEstimator) -> None:
        self.estimator = estimator

    def supports(self, method: str) -> bool:
        return hasattr(self.estimator, method)

    def both(self, X: FloatArray) -> Both:
        labels, unsure = self.labels(X)
        if not hasattr(self.estimator, "predict_proba"):
            return labels, None, unsure
        proba, proba_unsure = self.proba(X)
        return labels, proba, unsure | proba_unsure

    def proba(self, X: FloatArray) -> Out:
        _, proba, unsure = self.both(X)
        if proba is None:
            raise UnanswerableError(f"{type(self.estimator).__name__} gives no probabilities")
        return proba, unsure

    def labels(self, X: FloatArray) -> Out:
        labels, _, unsure = self.both(X)
        return labels, unsure

    def decision(self, X: FloatArray) -> Out:
        raise UnanswerableError(f"{type(self.estimator).__name__} has no decision function here")

    def values(self, X: FloatArray) -> Out:
        raise UnanswerableError(f"{type(self.estimator).__name__} gives no values here")


class SklearnNode(Node):
    """A member scikit-learn answers itself (exact: the same function of the same rows)."""

    def both(self, X: FloatArray) -> Both:
        estimator = self.estimator
        labels = predicted_labels(estimator, X)
        if not hasattr(estimator, "predict_proba"):
            return labels, None, _sure(len(X))
        return labels, np.asarray(estimator.predict_proba(X), dtype=np.float64), _sure(len(X))

    def proba(self, X: FloatArray) -> Out:
        return np.asarray(self.estimator.predict_proba(X), dtype=np.float64), _sure(len(X))

    def labels(self, X: FloatArray) -> Out:
        return predicted_labels(self.estimator, X), _sure(len(X))

    def decision(self, X: FloatArray) -> Out:
        return np.asarray(self.estimator.decision_function(X)), _sure(len(X))

    def values(self, X: FloatArray) -> Out:
        return np.asarray(self.estimator.predict(X)), _sure(len(X))


class TreesNode(Node):
    """A tree model evaluated by GTIL (see :mod:`ensembles.inference.gtil` for the plan)."""

    approximate = True

    def __init__(
        self, estimator: BaseEstimator, model: Any, plan: Plan, classes: NDArray[Any] | None
    ) -> None:
        super().__init__(estimator)
        self.model = model
        self.plan = plan
        self.classes = classes

    def supports(self, method: str) -> bool:
        if self.classes is None:
            return method == "predict"
        if method == "decision_function":
            return self.plan.margin
        return method in ("predict_proba", "predict")

    def _scores(self, X: FloatArray) -> FloatArray:
        rows = cast_rows(X, self.plan)
        if rows is None:
            raise UnanswerableError("values beyond float32")
        return gtil_scores(self.model, rows, self.plan)

    def both(self, X: FloatArray) -> Both:
        assert self.classes is not None
        scores = self._scores(X)
        proba = link(scores, self.plan)
        index, unsure = decide(proba if self.plan.decision == "proba" else scores, self.plan)
        return self.classes.take(index), proba, unsure

    def proba(self, X: FloatArray) -> Out:
        return link(self._scores(X), self.plan), _sure(len(X))

    def decision(self, X: FloatArray) -> Out:
        scores = self._scores(X)  # boosting's decision_function: raw scores, 1-D if binary
        return (scores[:, 0] if scores.shape[1] == 1 else scores), _sure(len(X))

    def values(self, X: FloatArray) -> Out:
        return link(self._scores(X), self.plan)[:, 0], _sure(len(X))


class LogisticNode(Node):
    """LogisticRegression: ``X @ coef_.T + intercept_``, expit (binary) or softmax."""

    approximate = True

    def __init__(self, estimator: BaseEstimator) -> None:
        super().__init__(estimator)
        self.coef_t = np.asarray(estimator.coef_, dtype=np.float64).T  # a view, as sklearn
        self.intercept = np.asarray(estimator.intercept_, dtype=np.float64)
        self.classes = np.asarray(estimator.classes_)

    def supports(self, method: str) -> bool:
        return method in ("predict_proba", "decision_function", "predict")

    def decision(self, X: FloatArray) -> Out:
        scores = X @ self.coef_t + self.intercept
        return (scores[:, 0] if scores.shape[1] == 1 else scores), _sure(len(X))

    def _proba(self, scores: FloatArray) -> FloatArray:
        if scores.ndim == 1:
            p1 = np.asarray(expit(scores))
            return np.column_stack([1.0 - p1, p1])
        shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
        return np.asarray(shifted / shifted.sum(axis=1, keepdims=True))

    def both(self, X: FloatArray) -> Both:
        scores, _ = self.decision(X)
        if scores.ndim == 1:  # LinearClassifierMixin.predict: scores > 0
            index, unsure = (scores > 0).astype(np.intp), np.abs(scores) <= TIE_MARGIN
        else:
            index, unsure = first_max(scores)
        return self.classes.take(index), self._proba(scores), unsure

    def proba(self, X: FloatArray) -> Out:
        return self._proba(self.decision(X)[0]), _sure(len(X))


class NaiveBayesNode(Node):
    """GaussianNB: its joint log-likelihood class by class, as ``_joint_log_likelihood``."""

    approximate = True

    def __init__(self, estimator: BaseEstimator) -> None:
        super().__init__(estimator)
        self.classes = np.asarray(estimator.classes_)
        self.theta = np.asarray(estimator.theta_, dtype=np.float64)
        self.var = np.asarray(estimator.var_, dtype=np.float64)
        self.log_prior = np.log(np.asarray(estimator.class_prior_, dtype=np.float64))
        self.constant = np.array(
            [-0.5 * np.sum(np.log(2.0 * np.pi * self.var[i, :])) for i in range(len(self.classes))]
        )

    def supports(self, method: str) -> bool:
        return method in ("predict_proba", "predict")

    def _jll(self, X: FloatArray) -> FloatArray:
        # log prior + (constant - 0.5 sum(...)), in scikit-learn's order, all classes at once
        # (each class's sum runs along the same contiguous axis as scikit-learn's).
        squares = np.sum(((X[:, None, :] - self.theta) ** 2) / self.var, axis=2)
        return np.asarray(self.log_prior + (self.constant - 0.5 * squares))

    def both(self, X: FloatArray) -> Both:
        jll = self._jll(X)
        index, _ = first_max(jll)
        top = np.partition(jll, -2, axis=1) if jll.shape[1] > 1 else None
        if top is None:
            unsure = _sure(len(X))
        else:  # the log-likelihoods are large: their last bits are relative
            scale = np.maximum(1.0, np.abs(top[:, -1]))
            unsure = top[:, -1] - top[:, -2] <= TIE_MARGIN * scale
        return self.classes.take(index), _softmax_of_logs(jll), unsure

    def proba(self, X: FloatArray) -> Out:
        return _softmax_of_logs(self._jll(X)), _sure(len(X))


def _softmax_of_logs(jll: FloatArray) -> FloatArray:
    """``exp(jll - logsumexp(jll))`` by scikit-learn's own ``_logsumexp`` steps: naive Bayes
    log-likelihoods can be huge, where another order of operations would show."""
    top = np.max(jll, axis=1, keepdims=True)
    is_top = jll == top
    others = jll.copy()
    others[is_top] = -np.inf
    m = np.sum(is_top.astype(jll.dtype), axis=1, keepdims=True, dtype=jll.dtype)
    shift = np.where(np.isfinite(top), top, 0)
    total = np.sum(np.exp(others - shift), axis=1, keepdims=True, dtype=jll.dtype)
    total = np.where(total == 0, total, total / m)
    log_total = np.log1p(total) + np.log(m) + top
    return np.asarray(np.exp(jll - log_total))


class LinearNode(Node):
    """LinearRegression and Ridge: ``X @ coef_ + intercept_``."""

    approximate = True

    def __init__(self, estimator: BaseEstimator) -> None:
        super().__init__(estimator)
        self.coef = np.asarray(estimator.coef_, dtype=np.float64)
        self.intercept = float(estimator.intercept_)

    def supports(self, method: str) -> bool:
        return method == "predict"

    def values(self, X: FloatArray) -> Out:
        return X @ self.coef + self.intercept, _sure(len(X))


class VotingNode(Node):
    """VotingClassifier (soft / hard, weighted) and VotingRegressor over member nodes."""

    def __init__(self, estimator: BaseEstimator, members: Sequence[Node]) -> None:
        super().__init__(estimator)
        self.members = list(members)
        self.approximate = any(m.approximate for m in members)
        weights = estimator.weights
        self.weights = (
            None
            if weights is None
            else [w for (_, e), w in zip(estimator.estimators, weights, strict=True) if e != "drop"]
        )

    def supports(self, method: str) -> bool:
        soft = getattr(self.estimator, "voting", None) == "soft"
        return method == "predict" or (method == "predict_proba" and soft)

    def proba(self, X: FloatArray) -> Out:
        outs = [m.proba(X) for m in self.members]
        stacked = np.asarray([p for p, _ in outs])
        return np.average(stacked, axis=0, weights=self.weights), _any([u for _, u in outs])

    def both(self, X: FloatArray) -> Both:
        classes = np.asarray(self.estimator.classes_)
        if self.estimator.voting == "soft":
            proba, unsure = self.proba(X)
            index, close = first_max(proba)
            return classes.take(index), proba, unsure | close
        counts = np.zeros((X.shape[0], len(classes)))  # np.bincount's sums, member by member
        rows = np.arange(X.shape[0])
        unsure = _sure(len(X))
        weights = self.weights or [1.0] * len(self.members)
        for member, weight in zip(self.members, weights, strict=True):
            labels, member_unsure = member.labels(X)
            counts[rows, labels.astype(np.intp)] += weight
            unsure |= member_unsure
        return classes.take(np.argmax(counts, axis=1)), None, unsure

    def values(self, X: FloatArray) -> Out:
        outs = [m.values(X) for m in self.members]
        predictions = np.asarray([v for v, _ in outs]).T
        return np.average(predictions, axis=1, weights=self.weights), _any([u for _, u in outs])


class BaggingNode(Node):
    """BaggingClassifier / BaggingRegressor: members on their feature subsets, or all trees
    in one treelite forest (``merged``, whose mean over trees is the members' mean)."""

    def __init__(
        self,
        estimator: BaseEstimator,
        members: Sequence[tuple[Node, NDArray[np.intp]]],
        merged: TreesNode | None = None,
    ) -> None:
        super().__init__(estimator)
        self.members = list(members)
        self.merged = merged
        self.approximate = merged is not None or any(m.approximate for m, _ in members)
        self.scale = len(estimator.estimators_) / estimator.n_estimators

    def supports(self, method: str) -> bool:
        return method in ("predict_proba", "predict")

    def _mean(self, mean: FloatArray) -> FloatArray:
        return mean if self.scale == 1.0 else mean * self.scale

    def proba(self, X: FloatArray) -> Out:
        if self.merged is not None:
            mean, unsure = self.merged.proba(X)
            return self._mean(mean), unsure
        n_classes = int(self.estimator.n_classes_)
        total = np.zeros((X.shape[0], n_classes))
        rows = np.arange(X.shape[0])
        unsure = _sure(len(X))
        for member, features in self.members:
            Xm = X[:, features]
            if hasattr(member.estimator, "predict_proba"):
                proba, member_unsure = member.proba(Xm)
                classes = np.asarray(member.estimator.classes_)
                if len(classes) == n_classes:
                    total += proba
                else:
                    total[:, classes.astype(np.intp)] += proba[:, : len(classes)]
            else:  # scikit-learn resorts to a vote for members without probabilities
                labels, member_unsure = member.labels(Xm)
                total[rows, labels.astype(np.intp)] += 1
            unsure |= member_unsure
        return total / self.estimator.n_estimators, unsure

    def both(self, X: FloatArray) -> Both:
        proba, unsure = self.proba(X)
        index, close = first_max(proba)
        return np.asarray(self.estimator.classes_).take(index), proba, unsure | close

    def values(self, X: FloatArray) -> Out:
        if self.merged is not None:
            mean, unsure = self.merged.values(X)
            return self._mean(mean), unsure
        outs = [member.values(X[:, features]) for member, features in self.members]
        total = sum((v for v, _ in outs), start=np.zeros(X.shape[0]))
        return total / self.estimator.n_estimators, _any([u for _, u in outs])


class StackingNode(Node):
    """StackingClassifier / StackingRegressor: members' columns by ``stack_method_``, then
    the final estimator's answer on them."""

    def __init__(
        self, estimator: BaseEstimator, members: Sequence[tuple[Node, str]], final: Node
    ) -> None:
        super().__init__(estimator)
        self.members = list(members)
        self.final = final
        self.approximate = final.approximate or any(
            m.approximate and method != "predict" for m, method in members
        )
        self.regression = not is_classifier(estimator)
        self.binary = not self.regression and len(estimator.classes_) == 2

    def supports(self, method: str) -> bool:
        return hasattr(self.estimator, method) and self.final.supports(method)

    def _meta(self, X: FloatArray) -> Out:
        parts: list[NDArray[Any]] = []
        unsure = _sure(len(X))
        for member, method in self.members:
            out, member_unsure = _call(member, method, X, self.regression)
            unsure |= member_unsure
            if out.ndim == 1:
                parts.append(out.reshape(-1, 1))
            elif method == "predict_proba" and self.binary:
                parts.append(out[:, 1:])
            else:
                parts.append(out)
        if self.estimator.passthrough:
            parts.append(X)
        return np.hstack(parts), unsure

    def both(self, X: FloatArray) -> Both:
        meta, unsure = self._meta(X)
        encoded, proba, final_unsure = self.final.both(meta)
        labels = np.asarray(self.estimator.classes_).take(encoded.astype(np.intp))
        return labels, proba, unsure | final_unsure

    def proba(self, X: FloatArray) -> Out:
        meta, unsure = self._meta(X)
        proba, final_unsure = self.final.proba(meta)
        return proba, unsure | final_unsure

    def decision(self, X: FloatArray) -> Out:
        meta, unsure = self._meta(X)
        decision, final_unsure = self.final.decision(meta)
        return decision, unsure | final_unsure

    def values(self, X: FloatArray) -> Out:
        meta, unsure = self._meta(X)
        values, final_unsure = self.final.values(meta)
        return values, unsure | final_unsure


def _call(node: Node, method: str, X: FloatArray, regression: bool) -> Out:
    """A node's answer by scikit-learn's method name."""
    if method == "predict_proba":
        return node.proba(X)
    if method == "decision_function":
        return node.decision(X)
    if method == "predict":
        return node.values(X) if regression else node.labels(X)
    raise UnanswerableError(f"unknown method {method!r}")


def _any(masks: Sequence[BoolArray]) -> BoolArray:
    return np.logical_or.reduce(masks) if len(masks) > 1 else masks[0]
