"""Votes, a voting override and spread: the members' own answers, combined as scikit-learn does.

The default answer is the engine's (exactly what the stored Pipeline says).  Votes,
agreement, spread and a per-request voting override need the members, so they are
computed from :func:`ensembles.members.members_of` on the preprocessed rows, with the
arithmetic scikit-learn's ``VotingClassifier`` uses (``np.average`` with the member
weights; ties go to the first maximum, i.e. the first class in ``classes`` order).
``votes`` count each member once; a model whose weights are not all 1 also gets the
weighted tallies, which a hard vote and ``agreement`` go by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from ensembles.errors import Problem
from ensembles.inference.result import PredictOptions
from ensembles.members import (
    FloatArray,
    IntArray,
    Member,
    has_members,
    member_class_indices,
    member_probabilities,
    member_values,
)
from ensembles.signature import ModelSignature

__all__ = [
    "class_labels",
    "floats_out",
    "label_lookup",
    "label_positions",
    "mean_probabilities",
    "member_spread",
    "option_problems",
    "total_weight",
    "vote_tallies",
    "votes_and_agreement",
]


def option_problems(
    signature: ModelSignature,
    pipeline: Pipeline,
    members: list[Member],
    options: PredictOptions,
    override: str | None,
) -> list[Problem]:
    """Every option the model cannot honour, each at its own field path."""
    kind, classifier = signature.kind, signature.task == "classification"
    voters = has_members(pipeline[-1]) and signature.supports_voting_override
    not_voters = f"{kind} does not combine members by vote"
    problems: list[Problem] = []

    def refuse(option: str, msg: str) -> None:
        problems.append(Problem(("options", option), msg))

    if override not in (None, "hard", "soft"):
        refuse("voting", "must be 'hard' or 'soft'")
    elif override is not None and not classifier:
        refuse("voting", "voting applies to classification only")
    elif override is not None and not voters:
        refuse("voting", f"{not_voters}, so its voting cannot be changed")
    elif override == "soft" and (blind := _without_probabilities(members)):
        refuse("voting", f"soft voting needs probabilities from every member; {blind} give none")
    if options.return_votes and not (classifier and voters):
        refuse("return_votes", not_voters if classifier else "votes apply to classification only")
    if options.return_std and not (voters and not classifier):
        msg = f"{kind} has no members whose predictions spread"
        refuse("return_std", "std applies to regression only" if classifier else msg)
    if options.return_proba and not (
        classifier and (override is not None or hasattr(pipeline, "predict_proba"))
    ):
        msg = f"this {kind} model gives no probabilities"
        if classifier and voters and signature.voting == "hard":
            msg += " (hard voting); set options.voting to 'soft' for averaged probabilities"
        refuse("return_proba", msg if classifier else "probabilities apply to classification only")
    return problems


def _without_probabilities(members: list[Member]) -> str:
    names = [m.name for m in members if not hasattr(m.estimator, "predict_proba")]
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def floats_out(values: Any) -> FloatArray:
    """A C-contiguous float64 array (what orjson's numpy support writes)."""
    return np.ascontiguousarray(values, dtype=np.float64)


def class_labels(signature: ModelSignature, pipeline: Pipeline) -> list[Any]:
    """The signature's JSON labels (same order as classes_), else classes_ made plain."""
    if signature.classes is not None:
        return list(signature.classes)
    return list(np.asarray(pipeline.classes_).tolist())


def label_positions(
    classes: Any, predicted: Any, lookup: Mapping[Any, int] | None = None
) -> IntArray:
    """Index of each predicted label in ``classes_`` (checked, so no sortedness is assumed:
    scikit-learn's ``classes_`` are sorted, and a binary search finds them at once).

    A few rows are looked up in a dict of the labels (``lookup``: :func:`label_lookup`
    of ``classes``, when the caller keeps it): the binary search and its check cost five
    numpy calls (10 us for one row, where the dict takes 3), whatever the rows.
    """
    known = np.asarray(classes)
    labels = np.asarray(predicted)
    few = labels.size <= _FEW_LABELS
    if not few and known.size and labels.dtype == known.dtype and labels.dtype != object:
        index = np.minimum(np.searchsorted(known, labels), known.size - 1)
        if np.array_equal(known[index], labels):
            return index.astype(np.int64)
    if lookup is None:
        lookup = label_lookup(known)
    return np.array([lookup[label] for label in labels.tolist()], dtype=np.int64)


def label_lookup(classes: Any) -> dict[Any, int]:
    """Each label of ``classes`` -> its position, as :func:`label_positions` reads it."""
    return {label: i for i, label in enumerate(np.asarray(classes).tolist())}


_FEW_LABELS = 8  # up to this many rows, labels are looked up in a dict


def total_weight(members: list[Member]) -> float:
    return float(sum(m.weight for m in members))


def _weighted(members: list[Member]) -> bool:
    """Do the members' weights make the weighted tallies differ from the plain counts?"""
    return any(m.weight != 1.0 for m in members)


def vote_tallies(
    members: list[Member], Xt: FloatArray, n_classes: int
) -> tuple[IntArray, FloatArray]:
    """Per row and class: how many members voted for it (each once), and the weighted
    tally (added in member order, as ``np.bincount`` with weights does; the same array
    as the counts, as floats, when every weight is 1)."""
    n = Xt.shape[0]
    counts = np.zeros((n, n_classes), dtype=np.int64)
    weighted = np.zeros((n, n_classes)) if _weighted(members) else None
    rows = np.arange(n)
    for member in members:
        picked = member_class_indices(member, Xt)
        counts[rows, picked] += 1
        if weighted is not None:
            weighted[rows, picked] += member.weight
    return counts, counts.astype(np.float64) if weighted is None else weighted


def mean_probabilities(members: list[Member], Xt: FloatArray, n_classes: int) -> FloatArray:
    """VotingClassifier's soft vote: ``np.average`` over members, weights None when uniform."""
    stacked = np.asarray([member_probabilities(m, Xt, n_classes) for m in members])
    weights = [m.weight for m in members]
    uniform = all(w == 1.0 for w in weights)
    return np.asarray(np.average(stacked, axis=0, weights=None if uniform else weights))


def votes_and_agreement(
    counts: IntArray,
    weighted: FloatArray,
    index: IntArray,
    classes: list[Any],
    members: list[Member],
) -> tuple[list[dict[str, int]], list[dict[str, float | int]] | None, FloatArray]:
    """Per row: {label: members} (each member once: integers summing to the number of
    members), the weighted tallies of the same classes (None unless some weight is not 1:
    they would repeat the counts), and the predicted class's share of the weighted tally.

    Only classes with at least one vote appear.  Weighted tallies are integers when every
    weight is whole, as the weights were given.
    """
    total = total_weight(members)
    picked = weighted[np.arange(len(index)), index]
    agreement = floats_out(picked / total if total > 0 else np.zeros_like(picked))
    keys = [str(c) for c in classes]
    table = counts.tolist()
    votes = [{keys[j]: v for j, v in enumerate(row) if v > 0} for row in table]
    if not _weighted(members):
        return votes, None, agreement
    whole = all(float(m.weight).is_integer() for m in members)
    tallies = (weighted.astype(np.int64) if whole else weighted).tolist()
    weighted_votes: list[dict[str, float | int]] = [
        {key: tally[j] for j, key in enumerate(keys) if row[j] > 0}
        for row, tally in zip(table, tallies, strict=True)
    ]
    return votes, weighted_votes, agreement


def member_spread(members: list[Member], Xt: FloatArray) -> FloatArray:
    """The population std (ddof 0, unweighted) of the members' predicted values per row."""
    values = np.asarray([member_values(m, Xt) for m in members])
    return floats_out(np.std(values, axis=0))
