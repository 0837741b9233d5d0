"""The voting members of a fitted ensemble, in one shape for every kind made of them.

Voting, the bagging family and forests all combine members that each see (a subset of)
the preprocessed columns and (a sample of) the training rows.  Metrics (OOB, per-member
scores, curves) and prediction (votes, hard/soft override, spread) need the same three
facts about each member, so they are extracted here once.  Which estimators have voting
members, and how to walk them, is the catalog's (``Kind.votes``, ``Kind.members``), looked
up by the fitted estimator's class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator

from ensembles.catalog import MemberWalk, kind_of

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class Member:
    """One fitted member: it is fed ``X[:, features]`` and was fitted on rows ``samples``."""

    name: str
    estimator: BaseEstimator
    features: IntArray | None  # None: every preprocessed column
    samples: IntArray | None  # None: every training row (in-bag indices, repeats possible)
    weight: float


def _walk(ensemble: BaseEstimator) -> MemberWalk | None:
    """How a voting kind's members are walked (None: not a voting kind)."""
    kind = kind_of(ensemble)
    return kind.members if kind is not None and kind.votes else None


def has_members(ensemble: BaseEstimator) -> bool:
    return _walk(ensemble) is not None


def members_of(ensemble: BaseEstimator, *, with_samples: bool = True) -> list[Member]:
    """The members of a fitted voting, bagging-family or forest estimator (else []).

    ``with_samples=False`` leaves ``samples`` None: scikit-learn re-draws every member's
    in-bag rows to give them (milliseconds for 100 trees), which prediction never needs.
    """
    walk = _walk(ensemble)
    if walk == "named":
        names = [name for name, est in ensemble.estimators if est != "drop"]
        weights = ensemble.weights
        kept = (
            [w for (_, est), w in zip(ensemble.estimators, weights, strict=True) if est != "drop"]
            if weights is not None
            else None
        )
        return [
            Member(name, est, None, None, float(kept[i]) if kept else 1.0)
            for i, (name, est) in enumerate(zip(names, ensemble.estimators_, strict=True))
        ]
    if walk == "bagged":
        drawn = ensemble.estimators_samples_ if with_samples else None
        return [
            Member(
                f"member_{i}",
                est,
                np.asarray(feats),
                None if drawn is None else np.asarray(drawn[i]),
                1.0,
            )
            for i, (est, feats) in enumerate(
                zip(ensemble.estimators_, ensemble.estimators_features_, strict=True)
            )
        ]
    if walk == "trees":
        samples = (
            ensemble.estimators_samples_
            if ensemble.bootstrap and with_samples
            else [None] * len(ensemble.estimators_)
        )
        return [
            Member(f"tree_{i}", est, None, None if s is None else np.asarray(s), 1.0)
            for i, (est, s) in enumerate(zip(ensemble.estimators_, samples, strict=True))
        ]
    return []


def member_input(member: Member, X: FloatArray) -> FloatArray:
    return X if member.features is None else X[:, member.features]


def member_class_indices(member: Member, X: FloatArray) -> IntArray:
    """Each row's predicted class as an index into the ensemble's ``classes_``.

    Members of scikit-learn's classifier ensembles are fitted on encoded labels
    (0..k-1), so their predictions are already indices.
    """
    return predicted_labels(member.estimator, member_input(member, X)).astype(np.int64)


def predicted_labels(estimator: BaseEstimator, X: Any) -> NDArray[Any]:
    """Its ``predict`` as one label per row (CatBoost's multiclass ``predict`` answers a
    column of them)."""
    pred = np.asarray(estimator.predict(X))
    return pred.reshape(len(pred)) if pred.ndim == 2 and pred.shape[1] == 1 else pred


def member_probabilities(
    member: Member,
    X: FloatArray,
    n_classes: int,
    *,
    checked: bool = False,
    answered: NDArray[Any] | None = None,
) -> FloatArray:
    """Probabilities over all k classes (a bootstrap sample may have missed some).

    ``checked``: the member is a scikit-learn tree and X are rows its own input check
    passes as they are (float32, C-contiguous, finite: checked once for all members by
    the caller), so the tree is asked without that check (``check_input=False``: the same
    answer; the check read all 200,000 x 20 training rows of a big forest for each tree).
    ``answered``: its ``predict_proba`` on X, already read (``leaf_walks``): not asked.
    """
    asked = (
        member.estimator.predict_proba(member_input(member, X), **_unchecked(checked))
        if answered is None
        else answered
    )
    proba = np.asarray(asked, dtype=np.float64)
    member_classes = np.asarray(member.estimator.classes_).astype(np.int64)
    if proba.shape[1] == n_classes and np.array_equal(member_classes, np.arange(n_classes)):
        return proba
    full = np.zeros((proba.shape[0], n_classes))
    full[:, member_classes] = proba
    return full


def member_values(member: Member, X: FloatArray, *, checked: bool = False) -> FloatArray:
    """The member's predictions (``checked``: see :func:`member_probabilities`)."""
    asked = member.estimator.predict(member_input(member, X), **_unchecked(checked))
    return np.asarray(asked, dtype=np.float64)


def _unchecked(checked: bool) -> dict[str, bool]:
    """A tree's keyword for rows checked by the caller (none for the others)."""
    return {"check_input": False} if checked else {}


def oob_mask(member: Member, n_rows: int) -> NDArray[np.bool_] | None:
    """Rows the member never saw, or None when it saw every row."""
    if member.samples is None:
        return None
    mask = np.ones(n_rows, dtype=bool)
    mask[member.samples] = False
    return mask
