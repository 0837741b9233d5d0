"""The weighted-sum rule: an ensemble whose output is a weighted sum of its members'
outputs is explained by the same weighted sum of its members' explanations, exact when
theirs are (soft voting and its own kinds, the bagging family, AdaBoost's decision
function, stacking's margin over a linear final estimator).  Which sum applies is read from
the kind's traits (``members``, ``combination``); members are explained recursively."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import is_classifier

from ensembles.catalog import kind_of
from ensembles.catalog.traits import Kind
from ensembles.explain.attribution import (
    Attribution,
    Budget,
    FloatArray,
    Output,
    least_exact,
    mapped,
    scattered,
    weighted_sum,
)
from ensembles.explain.linear import identity_attribution

Attribute = Callable[[Any, NDArray[Any], Output, Budget], Attribution]


def combined_attribution(
    estimator: Any,
    kind: Kind,
    Xt: NDArray[Any],
    output: Output,
    budget: Budget,
    attribute: Attribute,
) -> Attribution | None:
    if kind.combination in ("mean", "soft_mean") and kind.members == "bagged":
        return _bagged(estimator, Xt, output, budget, attribute)
    if kind.combination in ("mean", "soft_mean"):
        return _voted(estimator, Xt, output, budget, attribute)
    if kind.combination == "vote_or_median" and output == "margin":
        return _samme(estimator, Xt, budget, attribute)
    if kind.combination == "final_estimator":
        return _stacked(estimator, Xt, output, budget, attribute)
    return None


def member_output(member: Any, output: Output) -> Output:
    """What a member contributes to its ensemble's ``output``: probabilities where it has
    them, else its one-hot label (as scikit-learn's bagging and hard voting count it)."""
    if output == "proba" and not hasattr(member, "predict_proba"):
        return "votes"
    return output


def _aligned(part: Attribution, positions: NDArray[np.intp], n_classes: int) -> Attribution:
    """A member's per-class attribution placed on the ensemble's classes."""
    matrix = np.zeros((len(positions), n_classes))
    matrix[np.arange(len(positions)), positions] = 1.0
    return mapped(part, matrix)


def _voted(
    estimator: Any, Xt: NDArray[Any], output: Output, budget: Budget, attribute: Attribute
) -> Attribution | None:
    members = estimator.estimators_
    weights = np.ones(len(members)) if estimator.weights is None else np.asarray(estimator.weights)
    weights = weights / weights.sum()
    if not is_classifier(estimator):
        if output != "value":
            return None
        return weighted_sum(
            [(w, attribute(m, Xt, "value", budget)) for w, m in zip(weights, members, strict=True)]
        )
    hard = getattr(estimator, "voting", "soft") == "hard"
    if output != ("shares" if hard else "proba"):
        return None
    n_classes = len(estimator.classes_)
    parts = []
    for w, member in zip(weights, members, strict=True):
        part = attribute(member, Xt, "votes" if hard else "proba", budget)
        positions = np.asarray(member.classes_, dtype=np.intp)  # fitted on class indices
        parts.append((float(w), _aligned(part, positions, n_classes)))
    return weighted_sum(parts)


def _bagged(
    estimator: Any, Xt: NDArray[Any], output: Output, budget: Budget, attribute: Attribute
) -> Attribution | None:
    classifier = is_classifier(estimator)
    if output != ("proba" if classifier else "value"):
        return None
    n_columns = Xt.shape[1]
    members = estimator.estimators_
    parts = []
    for member, drawn in zip(members, estimator.estimators_features_, strict=True):
        columns = np.asarray(drawn, dtype=np.intp)
        part = attribute(
            member, Xt[:, columns], member_output(member, output), budget.subset(columns)
        )
        if classifier:
            positions = np.asarray(member.classes_, dtype=np.intp)  # fitted on class indices
            part = _aligned(part, positions, len(estimator.classes_))
        parts.append((1.0 / len(members), scattered(part, columns, n_columns)))
    return weighted_sum(parts)


def _samme(
    estimator: Any, Xt: NDArray[Any], budget: Budget, attribute: Attribute
) -> Attribution | None:
    """AdaBoost's decision function: each member's label coded as 1 for its class and
    -1/(K-1) for the others, weighted by its boosting weight (binary: the second class's
    code minus the first's)."""
    if not is_classifier(estimator):
        return None
    classes = estimator.classes_
    n_classes = len(classes)
    if n_classes < 2:
        return None
    scale, shift = 1.0 + 1.0 / (n_classes - 1), 1.0 / (n_classes - 1)
    total = float(np.sum(estimator.estimator_weights_))
    parts = []
    for member, w in zip(estimator.estimators_, estimator.estimator_weights_, strict=False):
        votes = attribute(member, Xt, "votes", budget)
        positions = np.searchsorted(classes, member.classes_).astype(np.intp)
        aligned = _aligned(votes, positions, n_classes)
        code = Attribution(scale * aligned.base - shift, scale * aligned.phi, aligned.method)
        parts.append((float(w) / total, code))
    summed = weighted_sum(parts)
    if n_classes == 2:
        return mapped(summed, np.array([[-1.0], [1.0]]))
    return summed


def _stacked(
    estimator: Any, Xt: NDArray[Any], output: Output, budget: Budget, attribute: Attribute
) -> Attribution | None:
    """The final estimator's margin (or value) is linear in the stacked outputs: the
    members' attributions, stacked as scikit-learn stacks their outputs, through it."""
    final = estimator.final_estimator_
    final_kind = kind_of(final)
    wanted = "margin" if is_classifier(estimator) else "value"
    if output != wanted or final_kind is None or final_kind.explain != "linear":
        return None
    coef = np.atleast_2d(np.asarray(final.coef_, dtype=np.float64))
    intercept = np.broadcast_to(np.asarray(final.intercept_, np.float64), (coef.shape[0],))
    meta = [
        _stacked_member(estimator, m, how, Xt, budget, attribute)
        for m, how in zip(estimator.estimators_, estimator.stack_method_, strict=True)
    ]
    if estimator.passthrough:
        meta.append(identity_attribution(Xt, budget))
    base = np.concatenate([a.base for a in meta])
    phi = np.concatenate([a.phi for a in meta], axis=1)
    stacked = mapped(Attribution(base, phi, least_exact([a.method for a in meta])), coef.T)
    return Attribution(stacked.base + intercept, stacked.phi, stacked.method)


def _stacked_member(
    estimator: Any, member: Any, how: str, Xt: NDArray[Any], budget: Budget, attribute: Attribute
) -> Attribution:
    classifier = is_classifier(estimator)
    if how == "predict_proba":
        part = attribute(member, Xt, "proba", budget)
        return _drop_first(part) if len(estimator.classes_) == 2 else part
    if how == "decision_function":
        return attribute(member, Xt, "margin", budget)
    if classifier:  # the member's label (a class index) as a number
        votes = attribute(member, Xt, "votes", budget)
        labels = np.asarray(member.classes_, dtype=np.float64)
        return mapped(votes, labels[:, None])
    return attribute(member, Xt, "value", budget)


def _drop_first(part: Attribution) -> Attribution:
    matrix: FloatArray = np.eye(part.base.shape[0])[:, 1:]
    return mapped(part, matrix)
