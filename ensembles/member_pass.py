"""One pass of a mean-combining ensemble's members over a set of rows, for every figure
measured on those rows.

Forests and the bagging family answer with their members' mean (``combination ==
"mean"``).  After the fit each member is asked once per set of rows, and everything
measured there comes from those answers: the ensemble's own answer (the members' sum in
member order divided by their number: scikit-learn's ``predict_proba`` / ``predict`` with
one job, bit for bit), each member's own score, the out-of-bag tallies and curve, and the
members' outputs the diversity measures sample.  On 200,000 rows a forest was otherwise
walked three times over (the ensemble, the OOB curve, the members' scores): see
docs/performance.md, "Training at scale".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.tree import BaseDecisionTree

from ensembles import metrics
from ensembles.leaf_order import LeafOrder, leaf_order
from ensembles.leaf_walks import LeafWalks, answer_from_leaves, walkable
from ensembles.members import (
    FloatArray,
    Member,
    member_class_indices,
    member_probabilities,
    member_values,
    members_of,
    oob_mask,
)
from ensembles.science.outputs import MemberOutputs
from ensembles.tasks import Task


@dataclass
class OobTally:
    """Per-row OOB sums (probabilities, votes or values) and counts over the members that
    drew samples, and the OOB curve at the checkpoints (``metrics.oob_scores``)."""

    sums: FloatArray
    counts: NDArray[np.int64]
    curve: list[dict[str, Any]] = field(default_factory=list)
    drawn: int = 0  # members that drew samples (the curve's ``n_estimators`` counts them)
    seen: int = 0  # of which tallied so far


@dataclass
class MemberPass:
    """What the members answered on one set of rows."""

    combined: FloatArray  # the ensemble's probabilities (classification) or values
    primaries: list[float | None]  # each member's accuracy or r2 on these rows
    oob: OobTally | None  # when the rows are the training rows and asked for
    sampled: MemberOutputs | None  # the diversity measures' members on the sampled rows
    sample: NDArray[np.intp] | None  # those rows (None: every row)

    def oob_tallies(self) -> metrics.OobTallies | None:
        """The OOB sums, counts and curve (None: no member drew samples)."""
        if self.oob is None or not self.oob.drawn:
            return None
        return self.oob.sums, self.oob.counts, self.oob.curve

    def labels(self, classes: NDArray[Any]) -> NDArray[Any]:
        """The ensemble's labels: the first maximum of its probabilities, as its predict."""
        return np.asarray(classes.take(np.argmax(self.combined, axis=1), axis=0))


@dataclass(frozen=True)
class _Answer:
    """One member on the rows: its probabilities (None: it votes) and class indices, or
    its values; its own score; its outputs on the sampled rows."""

    proba: FloatArray | None
    codes: NDArray[np.int64] | None
    values: FloatArray | None
    primary: float | None
    sampled: NDArray[Any]


@dataclass
class Ahead:
    """A pass's rows prepared before it (``_rows_for``) and its trees' leaves on them,
    walked meanwhile and through the pass (:mod:`ensembles.leaf_walks`); for the pass
    over ``X`` only."""

    X: FloatArray
    rows: NDArray[Any]
    order: LeafOrder | None
    walks: LeafWalks

    def stop(self) -> None:
        self.walks.stop()


def walk_ahead(ensemble: BaseEstimator, X: FloatArray) -> Ahead | None:
    """Start walking a forest's trees over ``X`` (the rows its pass will read), or None:
    not a forest of one-output scikit-learn trees on every column, or rows the trees'
    own check would refuse (the pass then asks each tree as before)."""
    members = members_of(ensemble, with_samples=False)
    if not walkable([m.estimator for m in members]) or any(m.features is not None for m in members):
        return None
    rows, order, checked = _rows_for(members, X)
    if not checked:
        return None
    trees = [m.estimator for m in members]
    return Ahead(X, rows, order, LeafWalks(trees, rows).start())


def shares_pass(ensemble: BaseEstimator, combination: str, walk: str) -> bool:
    """Whether the figures of this ensemble come from one pass: forests and the bagging
    family (their answer is the members' mean, their members are walked here)."""
    if combination != "mean" or walk not in ("bagged", "trees"):
        return False
    return bool(members_of(ensemble, with_samples=False))


def member_pass(
    ensemble: BaseEstimator,
    X: FloatArray,
    y: NDArray[Any],
    task: Task,
    classes: Sequence[Any],
    *,
    oob: bool,
    sample: NDArray[np.intp] | None,
    max_sampled: int,
    codes: NDArray[np.intp] | None = None,
    ahead: Ahead | None = None,
) -> MemberPass:
    """Every member once over ``X`` (on the threads joblib allows), summed in member order.

    ``oob``: ``X`` are the training rows in fitting order; tally each member's rows out of
    its sample.  ``sample``: the rows the diversity measures judge (None: all), for the
    first ``max_sampled`` members (with ``oob``: of those that left some row out).
    ``codes``: ``metrics.class_codes(y, classes)`` of a classification, when made.
    ``ahead``: these rows prepared and their leaves walked beside (:func:`walk_ahead`, on
    this very ``X``; stopped at the end): a walked member's answer is read from its
    leaves, the others are asked as before.
    """
    members = members_of(ensemble, with_samples=oob)
    n, k = X.shape[0], len(classes)
    if codes is None and task == "classification":
        codes = metrics.class_codes(y, classes)
    chosen = np.arange(n) if sample is None else sample
    total = np.zeros((n, k)) if task == "classification" else np.zeros(n)
    tally = _tally(members, n, task, k) if oob else None
    marks = set(metrics.checkpoints(tally.drawn)) if tally is not None else set()
    primaries: list[float | None] = []
    kept: list[tuple[Member, NDArray[Any], NDArray[np.bool_]]] = []
    walks: LeafWalks | None = None
    if ahead is not None and ahead.X is X:
        ordered, order, checked, walks = ahead.rows, ahead.order, True, ahead.walks
    else:
        ordered, order, checked = _rows_for(members, X)
    answers = _answers(members, ordered, order, checked, task, k, y, codes, chosen, walks)
    for m, answer in answers:
        _add(total, answer)
        primaries.append(answer.primary)
        mask = oob_mask(m, n) if oob else None
        if tally is not None and m.samples is not None:
            _add_oob(tally, answer, mask, marks, y, codes)
        if len(kept) < max_sampled and (not oob or (mask is not None and mask.any())):
            valid = np.ones(len(chosen), dtype=bool) if mask is None else mask[chosen]
            kept.append((m, answer.sampled, valid))
    if walks is not None:
        walks.stop()  # every tree answered (train() stops it too, whatever happened)
    total /= len(members)
    return MemberPass(total, primaries, tally, _sampled(kept, len(members)), sample)


def _tally(members: list[Member], n: int, task: Task, k: int) -> OobTally:
    sums = np.zeros((n, k)) if task == "classification" else np.zeros(n)
    drawn = sum(1 for m in members if m.samples is not None)
    return OobTally(sums, np.zeros(n, dtype=np.int64), [], drawn)


def _rows_for(members: list[Member], X: FloatArray) -> tuple[NDArray[Any], LeafOrder | None, bool]:
    """The rows as the members read them, their order, and whether they are checked.

    scikit-learn's trees convert every call's rows to float32 and check them (finite),
    so they are converted once here (the same values) and checked once: when every value
    is finite the trees are asked without their own check (the same answers; a row it
    refuses leaves the check to each call, which raises as before).  And they are walked
    in the order of the first member's leaves (:mod:`ensembles.leaf_order`: each row's
    answer is its own, put back in the rows' order before anything is summed or scored)."""
    if members and all(isinstance(m.estimator, BaseDecisionTree) for m in members):
        rows = np.ascontiguousarray(X, dtype=np.float32)
        checked = bool(np.isfinite(rows).all())
        first = members[0]
        columns = rows if first.features is None else rows[:, first.features]
        order = leaf_order(first.estimator, columns)
        return (rows, None, checked) if order is None else (order.rows(rows), order, checked)
    return X, None, False


def _answers(
    members: list[Member],
    X: NDArray[Any],
    order: LeafOrder | None,
    checked: bool,
    task: Task,
    k: int,
    y: NDArray[Any],
    codes: NDArray[np.intp] | None,
    chosen: NDArray[np.intp],
    walks: LeafWalks | None = None,
) -> Iterator[tuple[Member, _Answer]]:
    """Each member's answer, in member order, a batch at a time on the threads allowed
    (``X``: the rows in ``order``, whose answers are put back in the rows' order;
    ``checked``: trees asked without their own input check, see ``_rows_for``;
    ``walks``: the leaves of the members walked ahead over ``X``, by member index)."""
    index = {id(m): i for i, m in enumerate(members)}

    def back(answers: NDArray[Any]) -> NDArray[Any]:
        return answers if order is None else order.back(answers)

    def walked(m: Member) -> NDArray[Any] | None:
        leaves = None if walks is None else walks.take(index[id(m)])
        if leaves is None:
            return None
        return answer_from_leaves(m.estimator, leaves, task == "classification")

    def answer(m: Member) -> _Answer:
        read = walked(m)
        if task == "regression":
            own = member_values(m, X, checked=checked) if read is None else read
            values = back(np.asarray(own, dtype=np.float64))
            return _Answer(None, None, values, metrics.primary(task, y, values), values[chosen])
        proba = (
            back(member_probabilities(m, X, k, checked=checked, answered=read))
            if _has_proba(m)
            else None
        )
        member_codes = (
            metrics.first_maximum(proba).astype(np.int64)
            if proba is not None and isinstance(m.estimator, BaseDecisionTree)
            else back(member_class_indices(m, X))
        )  # a tree's predict is the first maximum of its probabilities (scikit-learn's code)
        assert codes is not None
        primary = metrics.primary(task, codes, member_codes)
        return _Answer(proba, member_codes, None, primary, member_codes[chosen])

    threads = metrics.threads()
    if threads <= 1:
        yield from ((m, answer(m)) for m in members)
        return
    # A few members ahead of the one being summed, so the sums overlap the predictions
    # and at most that many answers are held at once.
    with ThreadPoolExecutor(threads) as pool:
        ahead = iter(members)
        pending = deque((m, pool.submit(answer, m)) for m in islice(ahead, 2 * threads))
        while pending:
            m, future = pending.popleft()
            following = next(ahead, None)
            if following is not None:
                pending.append((following, pool.submit(answer, following)))
            yield m, future.result()


def _has_proba(m: Member) -> bool:
    return hasattr(m.estimator, "predict_proba")


def _add(total: FloatArray, answer: _Answer, rows: NDArray[np.bool_] | None = None) -> None:
    """Add a member's answer (on the rows of ``rows``; None: all) as its ensemble sums it:
    values, probabilities, or a vote for its class."""
    added = answer.values if answer.values is not None else answer.proba
    if added is not None:
        where = True if rows is None else rows if added.ndim == 1 else rows[:, np.newaxis]
        np.add(total, added, out=total, where=where)  # the rows' cells only, in place
    else:
        assert answer.codes is not None
        picked = np.arange(len(answer.codes)) if rows is None else np.flatnonzero(rows)
        total[picked, answer.codes[picked]] += 1


def _add_oob(
    tally: OobTally,
    answer: _Answer,
    mask: NDArray[np.bool_] | None,
    marks: set[int],
    y: NDArray[Any],
    codes: NDArray[np.intp] | None,
) -> None:
    """A member's out-of-bag rows into the tally, and the curve's point at a checkpoint."""
    if mask is not None and mask.any():
        tally.counts += mask
        _add(tally.sums, answer, mask)
    tally.seen += 1
    if tally.seen in marks and tally.counts.any():
        tally.curve.append(metrics.oob_point(tally.seen, tally.sums, tally.counts, y, codes))


def _sampled(
    kept: list[tuple[Member, NDArray[Any], NDArray[np.bool_]]], n_members: int
) -> MemberOutputs | None:
    """The diversity measures' members (``science.outputs.member_outputs``'s shape)."""
    if not kept:
        return None
    return MemberOutputs(
        [m.name for m, _, _ in kept],
        np.stack([out for _, out, _ in kept]),
        np.stack([valid for _, _, valid in kept]),
        np.asarray([m.weight for m, _, _ in kept], dtype=np.float64),
        n_members,
    )
