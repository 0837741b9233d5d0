"""The compiled engine of a tree ensemble: GTIL walking its trees, answering as scikit-learn.

Rule: use GTIL for requests up to the model's measured crossover (``max_rows``), where it
is faster than scikit-learn's per-tree Python loop; scikit-learn's vectorised walk wins
above it.  Figures: docs/performance.md.

Exactness, as scikit-learn computes it:

* forests and gradient boosting compare ``float32(x) <= threshold`` (scikit-learn casts
  X to float32), so rows are cast the same way before the float64 engine; histogram
  gradient boosting compares float64 values and routes NaN and categories itself, which
  GTIL reproduces once codes its encoder never saw are made NaN, as scikit-learn does;
* boosting's links are applied here to GTIL's raw scores (init/prior included), exactly
  as scikit-learn's losses do: sigmoid (binary), ``sigmoid(2 raw)`` (exponential loss),
  softmax (multiclass), ``exp`` (poisson/gamma); GTIL's own float post-processing is not
  used;
* labels follow each estimator's rule (forests: first maximum of the probabilities;
  gradient boosting: ``raw >= 0``; histogram gradient boosting: ``raw > 0``; multiclass:
  first maximum of raw scores).  Rows whose top two scores are within ``TIE_MARGIN`` —
  ties, where the last bit of a sum decides — get their label from scikit-learn itself.

Made and checked by :mod:`ensembles.inference.compiling`; the tree primitives (plans,
importing, links, labels) live in :mod:`ensembles.inference.gtil`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from ensembles.inference.engines import Answer
from ensembles.inference.gtil import (
    ENGINE,
    Plan,
    cast_rows,
    compiled_as,
    decide,
    decide_row,
    expit_pair,
    gtil_cells,
    gtil_scores,
    import_model,
    link,
    plan_for,
)
from ensembles.inference.lightgbm_row import LightGBMRow, input_edges, row_predictor
from ensembles.tasks import Task

__all__ = ["CompiledModel", "restore_model", "with_single_row"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class CompiledModel:
    """A fitted pipeline's ensemble step, compiled; answers on preprocessed rows.

    Pickles by re-creating the engine from the pipeline (the engine's handle is native).
    """

    name: str  # the engine's name: ENGINE
    task: Task
    kind: str  # scikit-learn class of the ensemble step
    max_rows: int  # requests up to this many rows are faster here than in scikit-learn
    pipeline: Pipeline = field(repr=False)
    model: Any = field(repr=False)  # treelite.Model
    plan: Plan = field(repr=False)
    # GTIL's threads per call: one when serving (requests run side by side); the check at
    # training may take the job's threads (each row's answer is the same either way).
    threads: int = field(default=1, repr=False)
    # LightGBM's own single-row predictor, for one-row requests: set at load time only if
    # its raw scores are GTIL's bits on the check rows (:func:`with_single_row`).
    single_row: LightGBMRow | None = field(default=None, repr=False)

    @cached_property
    def estimator(self) -> BaseEstimator:
        """The ensemble step (looked up once: a Pipeline's ``[-1]`` is a Python call, and
        a one-row answer asked for it twice)."""
        return self.pipeline[-1]

    def __reduce__(self) -> tuple[Any, ...]:
        return (restore_model, (self.pipeline, self.task, self.max_rows))

    @property
    def native(self) -> bool:
        """Every tree is walked by GTIL: no scikit-learn call but for rows on a tie."""
        return True

    @property
    def rows_apart(self) -> bool:
        """GTIL walks each row on its own (and ties ask the estimator for those rows)."""
        return self.threads == 1

    def use_for(self, n_rows: int) -> bool:
        """Is this engine the faster one for a request of ``n_rows`` rows?"""
        return n_rows <= self.max_rows

    def answer(self, Xt: NDArray[Any], *, with_proba: bool = False) -> Answer:
        if self.task == "regression":
            return Answer(self._values(Xt), None, self.name)
        labels, proba = self.predict_with_proba(Xt)
        return Answer(labels, proba if with_proba else None, self.name)

    def predict(self, Xt: ArrayLike) -> NDArray[Any]:
        """Labels (classification) or values (regression), as the estimator's ``predict``."""
        if self.task == "regression":
            return self._values(Xt)
        return self.predict_with_proba(Xt)[0]

    def predict_with_proba(self, Xt: ArrayLike) -> tuple[NDArray[Any], FloatArray]:
        """Labels and probabilities from one pass over the trees."""
        if self.task != "classification":
            raise ValueError("probabilities apply to classification only")
        estimator = self.estimator
        scores = self._margins(Xt)
        if scores is None:  # non-finite after the float32 cast: scikit-learn decides (or refuses)
            return estimator.predict(Xt), np.asarray(estimator.predict_proba(Xt), np.float64)
        proba = self._link(scores)
        index, ambiguous = decide(proba if self.plan.decision == "proba" else scores, self.plan)
        labels = np.asarray(estimator.classes_).take(index)
        if np.count_nonzero(ambiguous):  # (``any()`` goes through numpy's Python wrapper)
            labels[ambiguous] = estimator.predict(np.asarray(Xt)[ambiguous])
        return labels, proba

    def row_class(self, X: FloatArray) -> tuple[int, FloatArray] | None:
        """One checked row's class, as its position in ``classes_``, and its
        probabilities, from the same scores, link and rule as :meth:`predict_with_proba`;
        None where that asks scikit-learn (a row the cast cannot take, a row too close to
        call) or a score is NaN: the caller then asks :meth:`answer`.

        ``X``: one float64 row (shape ``(1, n)``) of finite values within float32's
        range, as :func:`~ensembles.inference.one_row.record_row` makes it for a lone
        record (below 2**53) and the small-table check for a one-row Arrow body
        (``small_tables._within_float32``).  The rule is applied to the row's Python
        floats (:func:`decide_row`), and the label is never made, looked up and found
        again (five small arrays and a dict lookup)."""
        if self.task != "classification" or X.shape[0] != 1 or self.plan.decision == "none":
            return None
        scores = self._checked_margins(X)
        if scores is None:
            return None
        proba = self._link(scores)
        plan = self.plan
        index = decide_row((proba if plan.decision == "proba" else scores)[0].tolist(), plan)
        return None if index is None else (index, proba)

    def cells_class(self, cells: tuple[float, ...]) -> tuple[int, list[float]] | None:
        """:meth:`row_class` of the row of ``cells`` (Python numbers, finite and within
        float32's range: a lone record's cells as
        :func:`~ensembles.inference.one_row.record_cells` checks them), its
        probabilities as Python floats, without the row's arrays: GTIL is given the
        cast row straight from ``cells`` (:func:`~ensembles.inference.gtil.gtil_cells`)
        and the link and the rule work on the floats.  The same class and the same bits
        as :meth:`row_class` of ``np.array([cells])``; None wherever that would take
        another way (another plan, link or width, a row too close to call), and
        ``row_class`` then answers."""
        plan = self.plan
        if (
            self.task != "classification"
            or plan.decision == "none"
            or self.single_row is not None
            or self.threads != 1
            or len(cells) != self._n_features
        ):
            return None
        scores = gtil_cells(self.model, cells, plan)
        if scores is None:
            return None
        if plan.link == "identity":
            proba = scores
        elif plan.link in ("expit", "expit2") and len(scores) == 1:
            proba = expit_pair(scores[0], plan.link == "expit2")
        else:
            return None
        index = decide_row(proba if plan.decision == "proba" else scores, plan)
        return None if index is None else (index, proba)

    def _values(self, Xt: ArrayLike) -> FloatArray:
        scores = self._margins(Xt)
        if scores is None:
            return np.asarray(self.estimator.predict(Xt), dtype=np.float64)
        return self._link(scores)[:, 0]

    def _margins(self, Xt: ArrayLike) -> FloatArray | None:
        """The trees' scores of the rows (raw margins where the plan applies the link), or
        None: rows GTIL cannot be given (scikit-learn answers them).

        One row of a model with LightGBM's single-row predictor is LightGBM's to score, as
        the row comes: the cast before GTIL makes GTIL read ``|x| <= 1e-35f`` as 0 and a
        categorical value in (-1, 0) as category 0, which LightGBM's predictor does itself
        (``with_single_row`` checks that on such rows too)."""
        X = self._rows(Xt)
        single = self.single_row
        if single is not None and X.shape[0] == 1:
            found = single.scores(X)
            if found is not None:
                return found
        cast = cast_rows(X, self.plan)
        return None if cast is None else self._scores(cast)

    def _checked_margins(self, X: FloatArray) -> FloatArray | None:
        """:meth:`_margins` of rows known finite and within float32's range (float64,
        C order; see :meth:`row_class`), where :func:`cast_rows` only casts (its bound
        check, two reductions, would hold), for a plan that casts to float32 and nothing
        else; any other plan, shape or dtype takes :meth:`_margins`."""
        plan = self.plan
        if (
            plan.float32
            and not plan.tiny_as_zero
            and self.single_row is None
            and X.dtype == np.float64
            and X.ndim == 2
            and X.shape[1] == self._n_features
        ):
            return self._scores(X.astype(np.float32).astype(np.float64))
        return self._margins(X)

    def _rows(self, Xt: ArrayLike) -> FloatArray:
        """The rows as float64, of the estimator's width (else scikit-learn's error)."""
        X = np.asarray(Xt, dtype=np.float64)
        expected = self._n_features
        if X.ndim != 2 or X.shape[1] != expected:
            shape = X.shape[1] if X.ndim == 2 else X.shape
            raise ValueError(f"X has {shape} features, but {self.kind} expects {expected}")
        return X

    def _input(self, Xt: ArrayLike) -> FloatArray | None:
        """The rows GTIL must see to compare as scikit-learn does (None: can't)."""
        return cast_rows(self._rows(Xt), self.plan)

    @cached_property
    def _n_features(self) -> int:
        """The estimator's feature count, read once: XGBoost's ``n_features_in_`` asks its
        booster through ctypes on every read (a few microseconds of a one-row answer)."""
        return int(self.estimator.n_features_in_)

    def _scores(self, X: FloatArray) -> FloatArray:
        """GTIL's scores of rows as :meth:`_input` gives them."""
        return gtil_scores(self.model, X, self.plan, self.threads)

    def _link(self, scores: FloatArray) -> FloatArray:
        return link(scores, self.plan)


def with_single_row(compiled: CompiledModel, rows: FloatArray) -> CompiledModel:
    """``compiled`` answering one row by LightGBM's own single-row predictor, if it is a
    LightGBM model whose predictor, given each row as it comes, gives the raw scores GTIL
    gives of the row as the engine casts it, bit for bit, on every row of ``rows`` (the
    check's preprocessed rows) and on copies of some of them with the cells the cast
    changes; else as it is (:mod:`ensembles.inference.lightgbm_row`)."""
    plan = compiled.plan
    if compiled_as(compiled.estimator) != "lightgbm" or not plan.margin or not plan.tiny_as_zero:
        return compiled
    X = compiled._rows(rows)
    if X.shape[0] == 0:
        return compiled
    X = np.vstack([X, input_edges(X, plan.truncated)])
    cast = cast_rows(X, plan)
    if cast is None:
        return compiled
    expected = gtil_scores(compiled.model, cast, plan)
    found = row_predictor(compiled.estimator, compiled._n_features, X, expected)
    return compiled if found is None else replace(compiled, single_row=found)


def restore_model(pipeline: Pipeline, task: Task, max_rows: int) -> CompiledModel:
    """The compiled engine of a pipeline whose step was compiled before (raises one of
    ``gtil.IMPORT_ERRORS``, or ValueError if the step is no longer supported)."""
    plan = plan_for(pipeline[-1], task)
    if isinstance(plan, str):
        raise ValueError(plan)
    model = import_model(pipeline[-1])
    return CompiledModel(ENGINE, task, type(pipeline[-1]).__name__, max_rows, pipeline, model, plan)
