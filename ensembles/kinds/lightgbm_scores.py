"""LightGBM's answers on the rows it is fitted on and on the hold-out rows, read from its
own score updaters while it fits: the figures after the fit without walking the trees.

LightGBM keeps every training row's raw score, added to tree by tree as it trains (the
rows of each leaf, as the learner partitioned them), and does the same for each
validation set it is given (each new tree answered on the set's binned rows).  Its
``LGBM_BoosterGetPredict`` hands them out through the objective's ``ConvertOutput``: the
very function ``predict`` applies to the raw scores it sums.  The sums are the same:
``predict`` adds the trees from zero in tree order and so does the updater (the initial
score it adds first is folded into the first tree's leaves, and ``x + y == y + x``); the
binned decisions match the raw ones (a value's bin is at most a split's bin exactly when
the value is at most the split's threshold, the bin's upper bound; NaN, unseen and
negative categories land where ``predict`` sends them).  So after the last round the
training rows' and the hold-out rows' scores are ``predict_proba`` / ``predict``'s bits
(measured on binary, multiclass and the four regression objectives, with bagging,
categories rare, unseen and negative, NaN where the fit had none: every row equal).

The hold-out rows reach LightGBM through its C API only (``LGBM_BoosterAddValidData`` on
the training booster, which ``fit`` replaces by one read from the model text at its
end): the estimator, its booster's Python state and so the artifact are unchanged, and no
metric is ever evaluated on them (``update`` trains, evaluation is only on request).

The curve's answers after each mark are ``lightgbm_kind.predict_at``'s labels, whose raw
scores are summed chunk by chunk (an order of its own): a label read from the updater's
sum is the same unless the row's score is within the two orders' rounding of a tie
(binary: of 0; else between its two largest), at most ``8 n u S`` apart (``n`` rounds,
``u`` the unit roundoff, ``S`` the sum over trees of the largest absolute leaf value).
Rows read within ``NEAR`` of a tie at any mark are answered by ``predict_at`` itself (a
handful), and when the bound exceeds ``NEAR`` the curve is left to ``predict_at``.
Regression's curve needs the chunked sums' own bits: it is left to ``predict_at``.

Whatever was read is checked: LightGBM answers a spread sample of the rows itself (final
and staged answers); on any difference, or a round that did not add a tree, nothing is
kept and the figures ask the model as before.
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from ensembles.kinds.base import FitAnswers
from ensembles.kinds.boosting_library import Keep

__all__ = ["NEAR", "ScoreWatch", "StagedLabels"]

# Rows read this close to a tie (binary: |p - 0.5|; else the two largest probabilities'
# relative gap) are answered by LightGBM at the end; the rounding bound must stay below.
NEAR = 1e-6
# Rows LightGBM answers itself to check what was read, spread evenly.
CHECK_ROWS = 256
_UNIT_ROUNDOFF = 2.0**-53


class ScoreWatch:
    """A LightGBM callback reading the score updaters at the curve's marks and after the
    last round; :meth:`answers` then checks and hands out what it read."""

    def __init__(self, keep: Keep, rows: int, classifier: bool) -> None:
        self.keep = keep
        self.rows = rows
        self.classifier = classifier
        self._at = {mark: i for i, mark in enumerate(keep.marks)}
        self._codes: list[NDArray[Any] | None] = [None] * len(keep.marks)
        self._near: list[NDArray[np.intp]] = []
        self._train: NDArray[np.float64] | None = None
        self._held: NDArray[np.float64] | None = None
        self._valid: Any = None  # the hold-out's Dataset, alive while LightGBM reads it
        self._failed = False

    def __call__(self, env: Any) -> None:
        if self._failed:
            return
        try:
            self._read(env.model, env.iteration + 1, env.end_iteration)
        except Exception:  # reading is optional: the figures then ask the model
            self._failed = True

    def _read(self, booster: Any, done: int, end: int) -> None:
        held = self.keep.held
        if self._valid is None and held is not None:
            self._valid = _add_valid(booster, held)
        if booster.current_iteration() != done:  # a round without a tree: marks move
            self._failed = True
            return
        index = self._at.get(done)
        if index is None and done != end:
            return
        basis = _scores(booster, 0 if held is None else 1, self.rows if held is None else len(held))
        if index is not None and self.classifier:
            self._codes[index], near = _codes(basis)
            self._near.append(near)
        if done == end:
            self._held = None if held is None else basis
            self._train = basis if held is None else _scores(booster, 0, self.rows)

    def answers(self, estimator: Any, X: Any) -> FitAnswers | None:
        """What was read, checked (None: nothing kept; ``X``: the rows of the fit)."""
        self._valid = None
        marks = self.keep.marks
        if self._failed or self._train is None or not marks:
            return None
        if int(estimator.n_estimators_) != marks[-1] or int(estimator.best_iteration_):
            return None
        train = _final(estimator, self._train)
        held = None if self._held is None else _final(estimator, self._held)
        if train is None or (self._held is not None and held is None):
            return None
        # Only sampled rows are asked: each is made contiguous alone (a copy of all the
        # rows was 2 x 0.025 s for 200,000 x 20, the same values for the rows taken).
        Xb = X if self.keep.held is None else self.keep.held
        staged = self._staged(estimator, Xb)
        if not _agrees(estimator, X, train):
            return None
        if held is not None and not _agrees(estimator, Xb, held):
            return None
        if staged is not None and not staged[1]:
            return None
        labels = None if staged is None else staged[0]
        return FitAnswers(
            train=train,
            held=held,
            staged=labels,
            marks=list(marks),
            staged_codes=None if labels is None else labels.codes,
        )

    def _staged(self, estimator: Any, Xb: NDArray[Any]) -> tuple[StagedLabels, bool] | None:
        """``predict_at``'s labels at the marks (their class codes: the codes read, the
        rows near a tie answered by ``predict_at``), and whether ``predict_at`` answers a
        spread sample of the rows with the same labels (None: regression, or the rounding
        bound too wide).  The rows near a tie and the sample are answered in one
        ``predict_at`` (each row's sums are its own, whatever rows it is asked with)."""
        from ensembles.kinds.lightgbm_kind import predict_at

        read = self._codes
        if not self.classifier or any(c is None for c in read):
            return None
        marks = self.keep.marks
        if _tie_margin(estimator, marks[-1]) > NEAR:
            return None
        classes = np.asarray(estimator.classes_)
        codes = [c.copy() for c in read if c is not None]
        near = np.unique(np.concatenate(self._near)) if self._near else np.empty(0, np.intp)
        sample = _sample(len(Xb))
        asked = np.union1d(near, sample).astype(np.intp)
        if not len(asked):
            return StagedLabels(classes, codes), True
        exact = [np.asarray(e) for e in predict_at(estimator, _rows(Xb, asked), marks)]
        if len(near):
            position = {label: j for j, label in enumerate(classes.tolist())}
            at_near = np.searchsorted(asked, near)
            for at, answered in zip(codes, exact, strict=True):
                at[near] = [position[label] for label in answered[at_near].tolist()]
        at_sample = np.searchsorted(asked, sample)
        agrees = all(
            np.array_equal(answered[at_sample], classes.take(at[sample]))
            for at, answered in zip(codes, exact, strict=True)
        )
        return StagedLabels(classes, codes), agrees


class StagedLabels(Sequence[NDArray[Any]]):
    """The labels after each mark, each made from its class codes when asked for: the
    curve counts its hits on the codes (``codes``), and 50 label arrays of 200,000
    objects cost 0.12-0.15 s of CPU to make for nobody."""

    def __init__(self, classes: NDArray[Any], codes: list[NDArray[Any]]) -> None:
        self.classes = classes
        self.codes = codes

    def __len__(self) -> int:
        return len(self.codes)

    @overload
    def __getitem__(self, index: int) -> NDArray[Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[NDArray[Any]]: ...
    def __getitem__(self, index: int | slice) -> NDArray[Any] | list[NDArray[Any]]:
        if isinstance(index, slice):
            return [self.classes.take(c) for c in self.codes[index]]
        return self.classes.take(self.codes[index])


def _add_valid(booster: Any, held: NDArray[Any]) -> Any:
    """The hold-out rows as a validation set of the training booster, through the C API
    (the Python booster's lists stay as they are)."""
    from lightgbm.basic import _safe_call
    from lightgbm.libpath import _LIB

    if booster.valid_sets:  # the one set it is given is the first after the training data
        raise ValueError("the booster already has validation sets")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Overriding the parameters..."
        valid = booster.train_set.create_valid(held, label=np.zeros(len(held))).construct()
    _safe_call(_LIB.LGBM_BoosterAddValidData(booster._handle, valid._handle))
    return valid


def _scores(booster: Any, data: int, rows: int) -> NDArray[np.float64]:
    """LightGBM's converted scores of its training data (0) or validation set (1), as
    (rows,) or (rows, classes)."""
    from lightgbm.basic import _safe_call
    from lightgbm.libpath import _LIB

    per_round = int(booster.num_model_per_iteration())
    out = np.empty(rows * per_round, dtype=np.float64)
    length = ctypes.c_int64(0)
    _safe_call(
        _LIB.LGBM_BoosterGetPredict(
            booster._handle,
            ctypes.c_int(data),
            ctypes.byref(length),
            out.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
        )
    )
    if length.value != len(out):
        raise ValueError("LightGBM answered another number of scores")
    return out if per_round == 1 else np.ascontiguousarray(out.reshape(rows, per_round, order="F"))


def _codes(scores: NDArray[np.float64]) -> tuple[NDArray[Any], NDArray[np.intp]]:
    """Each row's class code from its probabilities, and the rows within ``NEAR`` of a
    tie (binary: p > 0.5 exactly when the raw score is > 0, as the sigmoid is computed);
    a NaN counts as near (comparisons written so that it fails them)."""
    if scores.ndim == 1:
        near = np.flatnonzero(~(np.abs(scores - 0.5) > NEAR))
        return (scores > 0.5).astype(np.uint8), near
    dtype = np.uint8 if scores.shape[1] <= 256 else np.int32
    two = np.partition(scores, -2, axis=1)[:, -2:]
    near = np.flatnonzero(~(two[:, 1] > two[:, 0] * (1.0 + NEAR)))
    return np.argmax(scores, axis=1).astype(dtype), near


def _tie_margin(estimator: Any, rounds: int) -> float:
    """How far from a tie a probability read must be for ``predict_at``'s label to be
    the same: the two sums' rounding bound ``8 n u S`` (binary: on |p - 0.5|, which
    moves at most a quarter as fast as the raw score; else on the relative gap of the
    two largest probabilities, ``exp`` of the raw gap), plus the probabilities' own."""
    from ensembles.kinds.lightgbm_pass import leaf_values

    booster = estimator.booster_
    if float(booster.params.get("sigmoid", 1.0)) != 1.0:
        return float("inf")
    per_round = int(booster.num_model_per_iteration())
    largest = np.array([np.abs(v).max() for v in leaf_values(booster)])
    spread = max(float(largest[k::per_round].sum()) for k in range(per_round))
    bound = 8.0 * rounds * _UNIT_ROUNDOFF * spread
    return (bound if per_round == 1 else 4.0 * bound) + 1e-12


def _final(estimator: Any, scores: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """``predict_proba`` (classifier) or ``predict`` (regressor) from the converted scores,
    as LightGBM's scikit-learn class makes them (None: a shape it does not make)."""
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        return scores if scores.ndim == 1 else None
    if scores.ndim == 1:
        return np.vstack((1.0 - scores, scores)).transpose() if len(classes) == 2 else None
    return scores if scores.shape[1] == len(classes) > 2 else None


def _sample(rows: int) -> NDArray[np.intp]:
    return np.unique(np.linspace(0, rows - 1, min(CHECK_ROWS, rows)).astype(np.intp))


def _agrees(estimator: Any, X: NDArray[Any], final: NDArray[np.float64]) -> bool:
    """Whether LightGBM itself answers a spread sample of the rows with the same bits."""
    from ensembles.kinds.lightgbm_pass import _library_final

    if len(X) != len(final):
        return False
    rows = _sample(len(X))
    if len(rows) == 0:
        return True
    return bool(np.array_equal(_library_final(estimator, _rows(X, rows)), final[rows]))


def _rows(X: NDArray[Any], rows: NDArray[np.intp]) -> NDArray[Any]:
    """``np.ascontiguousarray(X)[rows]``'s values, without a copy of every row first."""
    return np.ascontiguousarray(np.asarray(X)[rows])
