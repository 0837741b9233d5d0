"""What each member of a fitted ensemble says about some rows, in one shape for every kind.

Diversity and ambiguity need, per member, its class index (classification) or value
(regression) on the rows it is judged on, and which of those rows it never trained on.
How to walk the members is the catalog's (``Kind.members``, found by the fitted class);
an ensemble of a class the catalog does not know is walked through ``estimators_`` when
its members are predictors, so kinds added later get diversity without code here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.base import BaseEstimator

from ensembles.catalog import MemberWalk, kind_of
from ensembles.members import (
    Member,
    member_class_indices,
    member_input,
    member_values,
    members_of,
    oob_mask,
    predicted_labels,
)
from ensembles.tasks import Task


@dataclass(frozen=True)
class MemberOutputs:
    """``outputs[i, j]``: member i on row j (class index or value); ``valid[i, j]``: member i
    never trained on row j (every cell of hold-out rows)."""

    names: list[str]
    outputs: NDArray[Any]
    valid: NDArray[np.bool_]
    weights: NDArray[np.float64]
    n_members_total: int


def walk_of(ensemble: BaseEstimator) -> MemberWalk | None:
    """How the catalog walks this fitted ensemble (None: a class it does not know)."""
    kind = kind_of(ensemble)
    return kind.members if kind is not None and kind.family == "ensemble" else None


def _generic_members(ensemble: BaseEstimator) -> list[Member]:
    """Members of an ensemble class the catalog does not know: ``estimators_`` that predict."""
    fitted = getattr(ensemble, "estimators_", None)
    if not isinstance(fitted, list) or not all(hasattr(e, "predict") for e in fitted):
        return []
    features = getattr(ensemble, "estimators_features_", None)
    samples = getattr(ensemble, "estimators_samples_", None)
    return [
        Member(
            f"member_{i}",
            est,
            None if features is None else np.asarray(features[i]),
            None if samples is None else np.asarray(samples[i]),
            1.0,
        )
        for i, est in enumerate(fitted)
    ]


def _named_members(ensemble: BaseEstimator) -> list[Member]:
    """Voting's and stacking's fitted members under their names, with voting's weights."""
    weights = getattr(ensemble, "weights", None)
    named = list(ensemble.named_estimators_.items())
    return [
        Member(name, est, None, None, 1.0 if weights is None else float(weights[i]))
        for i, (name, est) in enumerate(named)
        if est != "drop"
    ]


def _members(ensemble: BaseEstimator, walk: MemberWalk | None, with_samples: bool) -> list[Member]:
    if walk == "named":
        return _named_members(ensemble)
    if walk in ("bagged", "trees"):
        return members_of(ensemble, with_samples=with_samples)
    if walk == "boosted":
        fitted = ensemble.estimators_
        return [Member(f"member_{i}", e, None, None, 1.0) for i, e in enumerate(fitted)]
    if walk is None:
        return _generic_members(ensemble)
    return []


def _class_indices(
    ensemble: BaseEstimator, member: Member, walk: MemberWalk | None, X: NDArray[Any]
) -> NDArray[np.int64]:
    """Class indices into the ensemble's ``classes_``: scikit-learn's voting, bagging and
    forests fit members on encoded labels; AdaBoost (and unknown kinds whose members know
    the ensemble's labels) on the labels themselves."""
    classes = np.asarray(ensemble.classes_)
    member_classes = np.asarray(getattr(member.estimator, "classes_", []))
    raw = walk == "boosted" or (
        walk is None and np.array_equal(member_classes, classes) and classes.dtype.kind != "f"
    )
    if not raw:
        return member_class_indices(member, X)
    pred = predicted_labels(member.estimator, member_input(member, X))
    return np.asarray(pd.Index(classes).get_indexer(pred), dtype=np.int64)


def member_outputs(
    ensemble: BaseEstimator,
    X: NDArray[Any],
    task: Task,
    *,
    out_of_bag: bool,
    max_members: int,
    rows: NDArray[np.intp] | None = None,
) -> MemberOutputs | None:
    """Members' outputs on rows ``X`` (None: the ensemble has no members that predict).

    ``out_of_bag``: ``X`` are the training rows and only cells out of each member's sample
    are valid; members that saw every row are left out. At most ``max_members`` members
    (the first ones) are asked, on the rows ``rows`` of ``X`` (None: all).
    """
    walk = walk_of(ensemble)
    members = _members(ensemble, walk, with_samples=out_of_bag)
    total = len(members)
    n = X.shape[0]
    if out_of_bag:  # only members that left some row out
        members = [m for m in members if (mask := oob_mask(m, n)) is not None and mask.any()]
    members = members[:max_members]
    if len(members) == 0:
        return None
    chosen = np.arange(n) if rows is None else rows
    Xr = X[chosen]
    outputs = np.stack(
        [
            _class_indices(ensemble, m, walk, Xr)
            if task == "classification"
            else member_values(m, Xr)
            for m in members
        ]
    )
    valid = np.ones(outputs.shape, dtype=bool)
    if out_of_bag:
        for i, m in enumerate(members):
            mask = oob_mask(m, n)
            if mask is not None:
                valid[i] = mask[chosen]
    weights = np.asarray([m.weight for m in members], dtype=np.float64)
    return MemberOutputs([m.name for m in members], outputs, valid, weights, total)
