"""One fitted model's attribution, by its kind's ``explain`` trait; what has no exact
method (or no exact method for the output its ensemble needs of it) falls back to the
permutation estimate of that output."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensembles.catalog import Kind, kind_of
from ensembles.explain.attribution import Attribution, Budget, FloatArray, Output
from ensembles.explain.combined import combined_attribution
from ensembles.explain.linear import linear_attribution
from ensembles.explain.permutation import OutputFunction, permutation_attribution
from ensembles.explain.trees import tree_attribution


def attribute(estimator: Any, Xt: NDArray[Any], output: Output, budget: Budget) -> Attribution:
    """The attribution of ``output`` of ``estimator`` on the encoded rows ``Xt``."""
    kind = kind_of(estimator)
    method = "permutation" if kind is None else kind.explain
    found: Attribution | None = None
    if callable(method):
        found = method(estimator, Xt, output)
    elif kind is not None and method == "tree_shap" and not _category_splits(kind, estimator):
        found = tree_attribution(estimator, Xt, output, kind.explain_space)
    elif method == "linear":
        found = linear_attribution(estimator, Xt, output, budget)
    elif kind is not None and method == "weighted_sum":
        found = combined_attribution(estimator, kind, Xt, output, budget, attribute)
    if found is None:
        budget.check()
        found = permutation_attribution(output_function(estimator, output), Xt, budget)
    return found


def _category_splits(kind: Kind, estimator: Any) -> bool:
    """Does the model split on sets of categories (histogram boosting's native
    categories)?  TreeSHAP's trees compare with one threshold: such a model is sampled."""
    return kind.native_categorical and bool(np.any(getattr(estimator, "is_categorical_", None)))


def output_function(estimator: Any, output: Output) -> OutputFunction:
    """``output`` of ``estimator`` as a function of encoded rows, (m, k) floats."""

    def proba(X: NDArray[Any]) -> FloatArray:
        return np.asarray(estimator.predict_proba(X), dtype=np.float64)

    kind = kind_of(estimator)
    raw_scores = None if kind is None else kind.raw_scores

    def margin(X: NDArray[Any]) -> FloatArray:
        if raw_scores is not None:
            return np.asarray(raw_scores(estimator, X), dtype=np.float64).reshape(len(X), -1)
        return np.asarray(estimator.decision_function(X), dtype=np.float64).reshape(len(X), -1)

    def value(X: NDArray[Any]) -> FloatArray:
        return np.asarray(estimator.predict(X), dtype=np.float64).reshape(len(X), -1)

    def votes(X: NDArray[Any]) -> FloatArray:
        labels = np.asarray(estimator.predict(X))
        one_hot: FloatArray = labels[:, None] == np.asarray(estimator.classes_)[None, :]
        return one_hot.astype(np.float64)

    def shares(X: NDArray[Any]) -> FloatArray:
        return vote_shares(estimator, X)

    functions = {"proba": proba, "margin": margin, "value": value, "votes": votes}
    return functions.get(output, shares)


def vote_shares(estimator: Any, X: NDArray[Any]) -> FloatArray:
    """A hard vote's weighted share of each class (members predict class indices)."""
    labels = np.asarray(estimator.transform(X))  # (rows, members)
    n_members = labels.shape[1]
    weights = np.ones(n_members) if estimator.weights is None else np.asarray(estimator.weights)
    classes = np.arange(len(estimator.classes_))
    one_hot = (labels[:, :, None] == classes[None, None, :]).astype(np.float64)
    shares: FloatArray = np.einsum("nmc,m->nc", one_hot, weights / weights.sum())
    return shares
