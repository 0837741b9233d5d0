"""A stored version made ready to answer: its engines, the cheapest exact preprocessing, and
one call from checked columns to the prediction.

Built once when a version is loaded into the service's cache (:func:`prepare`), then
shared by every request (it holds no per-request state):

* the engines, in order: the compiled one (:mod:`ensembles.inference.compiled` or
  :mod:`ensembles.inference.composite`) first, re-created only if the version's metadata
  recorded that it passed the fidelity check when the version was created and it still
  answers the same at load time; scikit-learn's own last, for every other version and for
  requests larger than the compiled engine's crossover.  Each request is answered by the
  first engine that wants its size (:meth:`Servable.engine_for`), a big request in
  parts on several threads when the engine's rows are apart
  (:mod:`ensembles.inference.row_parts`);
* when the preprocessing only passes numeric columns through (tables of numbers without
  missing values), stacking the request's columns as float64 is exactly what the
  ColumnTransformer returns (checked here once), so rows never become a DataFrame.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline

from ensembles.errors import Problem
from ensembles.inference.cells import MatrixColumns, input_error
from ensembles.inference.compiling import rebuild
from ensembles.inference.engines import SKLEARN, Answer, Engine, SklearnEngine
from ensembles.inference.one_row import RowLane, record_cells, row_lane
from ensembles.inference.result import Prediction, PredictOptions
from ensembles.inference.row_parts import RowParts
from ensembles.inference.votes import (
    class_labels,
    floats_out,
    label_lookup,
    label_positions,
    mean_probabilities,
    member_spread,
    option_problems,
    total_weight,
    vote_tallies,
    votes_and_agreement,
)
from ensembles.members import FloatArray, Member, members_of
from ensembles.signature import ModelSignature

__all__ = ["Rows", "Servable", "prepare"]

# Checked columns (one array per feature), or a frame of them.
Rows = pd.DataFrame | Mapping[str, ArrayLike]
_PROBE_VALUES = (0.0, 1.5, -2.25, 1e300, 3.0000000000000004)


@dataclass(frozen=True, eq=False)
class Servable:
    """A fitted pipeline, its signature, and the engines that answer for it."""

    pipeline: Pipeline
    signature: ModelSignature
    engines: tuple[Engine, ...]  # in order of preference; the last answers any size
    passthrough: tuple[str, ...] | None = None  # columns whose float64 stack is the input
    row_parts: RowParts = field(default_factory=RowParts)  # threads of a big request
    # The problems of options that need no members, by options (see _option_problems).
    _memberless_problems: dict[PredictOptions, tuple[Problem, ...]] = field(
        default_factory=dict, init=False, repr=False
    )
    # Each label of the pipeline's ``classes_`` -> its position, made on first use (a
    # one-row answer's label found at once, not after a dict of the labels is built).
    _label_index: dict[Any, int] = field(default_factory=dict, init=False, repr=False)
    # The lane of lone records (``one_row.row_lane``; None: none), made on first use.
    _lane: list[RowLane | None] = field(default_factory=list, init=False, repr=False)

    def engine_for(self, n_rows: int) -> Engine:
        """The engine that answers a request of ``n_rows`` rows."""
        for engine in self.engines:
            if engine.use_for(n_rows):
                return engine
        return self.engines[-1]

    def native_for(self, n_rows: int) -> bool:
        """Does a request of ``n_rows`` rows stay in native code (GTIL, numpy) throughout?"""
        return self.engine_for(n_rows).native

    def transform(self, rows: Rows) -> NDArray[Any]:
        """The preprocessed rows, exactly as the pipeline's preprocessing gives them."""
        if self.passthrough is not None:
            return stack_columns(rows, self.passthrough)
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(dict(rows))
        return np.asarray(self.pipeline[:-1].transform(frame))

    def answer(self, rows: Rows, *, with_proba: bool = False) -> Answer:
        """The pipeline's predictions (and probabilities when asked) for ``rows``."""
        return self._answer(self.transform(rows), with_proba)

    def _answer(self, Xt: NDArray[Any], with_proba: bool) -> Answer:
        """The answer of the engine for ``Xt``'s size (in parts when that is exact)."""
        return self.row_parts.answer(self.engine_for(Xt.shape[0]), Xt, with_proba=with_proba)

    def predict(self, rows: Rows, options: PredictOptions) -> Prediction:
        """The prediction for checked columns ``rows``, with what ``options`` ask.

        The default answer is the engine's; votes, spread and a voting override always
        come from scikit-learn's members.  Options the model cannot honour raise
        PredictionInputError at ``("options", name)`` before any work.
        """
        signature = self.signature
        override = None if options.voting in (None, signature.voting) else options.voting
        needs_members = override is not None or options.return_votes or options.return_std
        members = members_of(self.pipeline[-1], with_samples=False) if needs_members else []
        problems = self._option_problems(members, options, override, needs_members)
        if problems:
            raise input_error("options", list(problems), len(problems))
        Xt = self.transform(rows)
        if signature.task == "regression":
            return self._regress(members, Xt, options)
        return self._classify(members, Xt, options, override)

    def predict_record(
        self, instances: object, options: PredictOptions, max_rows: int | None
    ) -> tuple[Prediction, list[str]] | None:
        """The prediction and warnings of a request of one JSON record (``instances``,
        unchecked), exactly as ``predict(check_rows(...).columns, options)`` gives them,
        when it can be answered without the layers a request of many rows needs
        (:mod:`ensembles.inference.one_row`); else None: check and predict it so."""
        lane = self._lane_for(options)
        if lane is None:
            return None
        cells = record_cells(lane, instances, max_rows)
        if cells is None:
            return None
        picked = self._cells_answer(lane, cells, options)
        if picked is not None:
            return picked, []
        X = np.array(cells, dtype=np.float64).reshape(1, -1)  # record_row's row
        return self._lane_answer(lane, X, options), []

    def _cells_answer(
        self, lane: RowLane, cells: tuple[Any, ...], options: PredictOptions
    ) -> Prediction | None:
        """:meth:`_lane_answer` of the row of ``cells`` by a compiled engine's class of
        the cells themselves (``CompiledModel.cells_class``: the row's arrays never made,
        the probabilities one array at the end), when it takes them; else None."""
        if lane.classes is None or not lane.plain_positions:
            return None
        engine = self.engine_for(1)
        cells_class = getattr(engine, "cells_class", None)
        picked = cells_class(cells) if cells_class is not None else None
        if picked is None:
            return None
        index, proba = picked
        return Prediction(
            predictions=[lane.classes[index]],
            probabilities=np.array([proba], dtype=np.float64) if options.return_proba else None,
            engine=engine.name,
        )

    def predict_row(
        self, names: tuple[str, ...], row: NDArray[Any], options: PredictOptions
    ) -> Prediction | None:
        """The prediction of one checked row ``row`` (shape ``(1, n)``, float64, C order,
        a column per name of ``names``, every value finite and within float32's range: a
        one-row Arrow body read from its bytes and checked,
        :class:`~ensembles.inference.cells.MatrixRows`), exactly as
        ``predict(MatrixColumns(names, row), options)`` gives it, by the lane of lone
        records (:meth:`predict_record`); else None: predict it so.

        Why: a lone Arrow row answered by ``predict`` went through its 30 column views,
        the preprocessing's stack (a copy of the very row) and the engine's general
        answer with its label lookups, ~10 us of CPU more than a lone JSON record's lane
        (issue 24.1).  The row is the one ``predict`` would give the model: the
        preprocessing of a lane's model passes exactly ``names`` through, in order, and
        stacks a :class:`MatrixColumns` of them as a C-ordered float64 copy of ``row``."""
        lane = self._lane_for(options)
        if lane is None or names != lane.names:
            return None
        if row.dtype != np.float64 or row.shape != (1, len(names)) or not row.flags.c_contiguous:
            return None
        picked = self._cells_answer(lane, tuple(row[0].tolist()), options)
        return picked if picked is not None else self._lane_answer(lane, row, options)

    def _lane_for(self, options: PredictOptions) -> RowLane | None:
        """The lane of lone rows, when it can answer ``options`` as ``predict`` would."""
        lane = self._lane[0] if self._lane else self._made_lane()
        if lane is None or options.return_votes or options.return_std:
            return None
        if options.voting not in (None, self.signature.voting):
            return None  # an override: the members answer
        if self._option_problems([], options, None, False):
            return None  # raised by predict, as ever
        return lane

    def _lane_answer(self, lane: RowLane, X: FloatArray, options: PredictOptions) -> Prediction:
        """The answer to the lone row ``X`` of a lane's model (its preprocessed row)."""
        engine = self.engine_for(1)
        if lane.classes is None:
            answer = self._answer(X, False)
            return Prediction(floats_out(answer.predictions), engine=answer.engine)
        row_class = getattr(engine, "row_class", None) if lane.plain_positions else None
        picked = row_class(X) if row_class is not None else None
        if picked is None:  # the engine's general answer, as predict takes it
            answer = self._answer(X, options.return_proba)
            index = int(self._label_positions(answer.predictions)[0])
            proba, name = answer.probabilities, answer.engine
        else:
            index, proba = picked
            name = engine.name
        wanted = options.return_proba and proba is not None
        return Prediction(
            predictions=[lane.classes[index]],
            probabilities=floats_out(proba) if wanted else None,
            engine=name,
        )

    def _made_lane(self) -> RowLane | None:
        signature = self.signature
        classes = None
        fitted = None
        if signature.task != "regression":
            classes = class_labels(signature, self.pipeline)
            fitted = self.pipeline.classes_
        lane = row_lane(
            signature.feature_names, signature.numbers_only, self.passthrough, classes, fitted
        )
        self._lane[:] = [lane]  # threads that make it at once make the same one
        return lane

    def _option_problems(
        self,
        members: list[Member],
        options: PredictOptions,
        override: str | None,
        needs_members: bool,
    ) -> tuple[Problem, ...]:
        """:func:`option_problems`, worked out once per options that need no members (a
        few: the voting the model has or none, probabilities or not) rather than on every
        request: asking a Pipeline for ``predict_proba`` alone costs 2.5 us."""
        if needs_members:
            return tuple(option_problems(self.signature, self.pipeline, members, options, override))
        known = self._memberless_problems.get(options)
        if known is None:
            found = option_problems(self.signature, self.pipeline, members, options, override)
            known = self._memberless_problems.setdefault(options, tuple(found))
        return known

    def _classify(
        self,
        members: list[Member],
        Xt: NDArray[Any],
        options: PredictOptions,
        override: str | None,
    ) -> Prediction:
        """Default: the engine's answer; with an override, the members' combination."""
        classes = class_labels(self.signature, self.pipeline)
        k = len(classes)
        tallies = None
        if override == "hard" or options.return_votes:
            tallies = vote_tallies(members, _floats(Xt), k)
        proba: FloatArray | None = None
        engine = SKLEARN
        if override == "hard" and tallies is not None:
            weighted = tallies[1]  # a hard vote is by weight, as VotingClassifier's
            proba = weighted / total_weight(members)  # weighted vote shares
            index = np.argmax(weighted, axis=1)  # first maximum: ties go to the first class
        elif override == "soft":
            proba = mean_probabilities(members, _floats(Xt), k)
            index = np.argmax(proba, axis=1)
        else:
            answer = self._answer(Xt, options.return_proba)
            index = self._label_positions(answer.predictions)
            proba, engine = answer.probabilities, answer.engine
        votes, weighted_votes, agreement = None, None, None
        if options.return_votes and tallies is not None:
            votes, weighted_votes, agreement = votes_and_agreement(
                *tallies, index, classes, members
            )
        return Prediction(
            predictions=_labels(classes, index),
            probabilities=floats_out(proba) if options.return_proba and proba is not None else None,
            votes=votes,
            agreement=agreement,
            engine=engine,
            weighted_votes=weighted_votes,
        )

    def _label_positions(self, predicted: Any) -> NDArray[np.int64]:
        """:func:`label_positions` in the pipeline's ``classes_``, with the lookup of its
        labels made once (fitted classes never change; threads that make it at once make
        the same one)."""
        classes = self.pipeline.classes_
        lookup = self._label_index
        if not lookup:
            lookup.update(label_lookup(classes))
        return label_positions(classes, predicted, lookup)

    def _regress(
        self, members: list[Member], Xt: NDArray[Any], options: PredictOptions
    ) -> Prediction:
        """Regression: the engine's predictions; std is unweighted over members (ddof 0)."""
        answer = self._answer(Xt, False)
        std = member_spread(members, _floats(Xt)) if options.return_std else None
        return Prediction(floats_out(answer.predictions), std=std, engine=answer.engine)


def _labels(classes: list[Any], index: NDArray[np.intp]) -> list[Any]:
    """Each row's label, the very class objects, picked in C (10,000 rows: 0.1 ms, where a
    Python step per row took 0.6)."""
    if len(index) <= _FEW_ROWS:  # three numpy calls cost more than a few lookups
        return [classes[i] for i in index.tolist()]
    labels = np.empty(len(classes), dtype=object)
    labels[:] = classes
    return list(labels.take(index).tolist())


_FEW_ROWS = 8


def _floats(Xt: NDArray[Any]) -> FloatArray:
    """Members were fitted on the preprocessed matrix, so they are fed it, as float64."""
    return np.asarray(Xt, dtype=np.float64)


def prepare(
    pipeline: Pipeline,
    signature: ModelSignature,
    recorded: Mapping[str, Any] | None,
    row_parts: RowParts | None = None,
) -> Servable:
    """The servable form of a stored version, given the verdict recorded at its creation.

    ``recorded`` is the version's ``inference`` metadata (None for versions made before
    the compiled engine existed: scikit-learn serves them); ``row_parts``: the threads a
    big request may be answered on (None: one).  Call from a worker thread:
    re-creating an engine takes tens of milliseconds.
    """
    task = signature.task
    engines: list[Engine] = []
    if recorded is not None:
        compiled, _ = rebuild(pipeline, task, recorded)
        if compiled is not None:
            engines.append(compiled)
    engines.append(SklearnEngine(pipeline[-1], task))
    return Servable(
        pipeline,
        signature,
        tuple(engines),
        _checked_passthrough(pipeline),
        row_parts if row_parts is not None else RowParts(),
    )


# --- the passthrough preprocessing ------------------------------------------------------


def stack_columns(rows: Rows, columns: tuple[str, ...]) -> NDArray[np.float64]:
    """What a passthrough ColumnTransformer gives, as float64 (pandas' own block copy;
    no copy at all for columns that are already one matrix's, in order)."""
    if isinstance(rows, pd.DataFrame):
        frame = rows if tuple(rows.columns) == columns else rows[list(columns)]
        return frame.to_numpy(dtype=np.float64)
    if type(rows) is MatrixColumns and rows.matrix is not None and rows.names == columns:
        return np.array(rows.matrix, dtype=np.float64, order="C")  # these very columns
    parts = [rows[c] for c in columns]
    if parts and np.size(parts[0]) <= _COPIED_ROWS:  # one C copy beats proving a view
        flat = np.concatenate(parts, dtype=np.float64, casting="unsafe")  # as asarray
        return flat.reshape(len(parts), -1).T.copy()
    arrays = [np.asarray(part, dtype=np.float64) for part in parts]
    whole = one_matrix(arrays)
    return np.column_stack(arrays) if whole is None else whole


_COPIED_ROWS = 16  # up to this many rows, the columns are copied into a new matrix


def one_matrix(arrays: list[NDArray[np.float64]]) -> NDArray[np.float64] | None:
    """The C-ordered matrix whose consecutive columns ``arrays`` are, as a read-only view,
    else None.  Columnar rows are checked into views of one matrix (``check_rows``): when
    they come in the model's column order, the model reads that matrix as it is, where
    stacking the columns again cost 1 ms per 10,000 rows of 30 columns.  Only memory the
    arrays themselves span is viewed: every column's start and stride is checked."""
    first = arrays[0] if arrays else None
    if first is None or first.ndim != 1 or first.dtype != np.float64:
        return None
    size, step = first.itemsize, len(arrays) * first.itemsize
    start = first.__array_interface__["data"][0]
    for j, column in enumerate(arrays):
        if column.dtype != np.float64 or column.shape != first.shape:
            return None
        if column.__array_interface__["data"][0] != start + j * size:
            return None
        if len(column) > 1 and column.strides != (step,):
            return None
    shape = (len(first), len(arrays))
    return np.lib.stride_tricks.as_strided(first, shape, (step, size), writeable=False)


def _passthrough_columns(pipeline: Pipeline) -> tuple[str, ...] | None:
    """The columns, when preprocessing only passes numeric columns through in order."""
    if len(pipeline) != 2 or not isinstance(pipeline[0], ColumnTransformer):
        return None
    transformers = pipeline[0].transformers  # as built: fitting swaps in FunctionTransformer
    if pipeline[0].remainder != "drop" or len(transformers) != 1:
        return None
    if transformers[0][1] != "passthrough":
        return None
    columns = list(transformers[0][2])
    return tuple(columns) if all(isinstance(c, str) for c in columns) else None


def _checked_passthrough(pipeline: Pipeline) -> tuple[str, ...] | None:
    """The passthrough columns, if stacking them equals the preprocessing on probe rows."""
    columns = _passthrough_columns(pipeline)
    if columns is None:
        return None
    probe = pd.DataFrame({c: np.asarray(_PROBE_VALUES, dtype=np.float64) for c in columns})
    try:
        expected = np.asarray(pipeline[:-1].transform(probe), dtype=np.float64)
    except (ValueError, TypeError):
        return None
    same = np.array_equal(stack_columns(probe, columns), expected, equal_nan=True)
    return columns if same else None
