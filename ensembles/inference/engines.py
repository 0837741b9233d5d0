"""Engines: what answers a request's preprocessed rows, and scikit-learn's own engine.

Every engine answers as the stored estimator does (labels identical, numbers within 1e-9)
and says for which request sizes it is the one to use, so the servable takes the first
engine of its list that wants the request and never asks what kind of engine it holds.
The compiled engines (:class:`~ensembles.inference.compiled.CompiledModel`,
:class:`~ensembles.inference.composite.CompiledComposite`) want requests up to their
measured crossover; :class:`SklearnEngine` answers any size and comes last.

scikit-learn answers with the ensemble step on the preprocessed rows, as the Pipeline
does, with no repeated work: for estimators whose ``predict`` is by scikit-learn's own
code the first maximum of ``predict_proba`` (forests, bagging, soft voting), labels come
from the probabilities already computed rather than from a second pass over the members,
stacking's members are asked once for both its labels and its probabilities, and
gradient boosting's trees are walked once for both (:func:`_boosted`), outside the GIL
for scikit-learn's own (:mod:`ensembles.inference.boosted_sum`); a forest's trees are
summed without joblib's wrapper around each (:mod:`ensembles.inference.forest_mean`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator

from ensembles.catalog import LabelRule, kind_of
from ensembles.inference.boosted_sum import boosted_raw
from ensembles.inference.forest_mean import forest_mean
from ensembles.inference.library_threads import threaded_twin
from ensembles.tasks import Task

__all__ = ["SKLEARN", "Answer", "Engine", "SklearnEngine"]

SKLEARN = "scikit-learn"
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Answer:
    """An engine's answer for a request's rows, and which engine gave it."""

    predictions: NDArray[Any]  # labels (classes_ values) or regression values
    probabilities: FloatArray | None  # when asked for and the estimator has them
    engine: str


class Engine(Protocol):
    """Answers preprocessed rows exactly as the fitted ensemble step does."""

    @property
    def name(self) -> str:
        """Recorded with each answer (``treelite-gtil``, ``scikit-learn``)."""
        ...

    @property
    def native(self) -> bool:
        """Does an answer stay in native code (no scikit-learn call), so that a small
        request costs tens of microseconds of CPU?"""
        ...

    @property
    def rows_apart(self) -> bool:
        """Is each row's answer computed from that row alone, in the calling thread, so
        that a big request answered in parts on several threads gets the same bits
        (:mod:`ensembles.inference.row_parts`)?"""
        ...

    def use_for(self, n_rows: int) -> bool:
        """Is this engine the one to answer a request of ``n_rows`` rows?"""
        ...

    def answer(self, Xt: NDArray[Any], *, with_proba: bool = False) -> Answer:
        """Predictions (and probabilities when asked) for the preprocessed rows ``Xt``."""
        ...


@dataclass(frozen=True, eq=False)
class SklearnEngine:
    """The fitted estimator itself: answers every request size, exactly."""

    estimator: BaseEstimator
    task: Task
    name: str = SKLEARN
    native: bool = False

    @property
    def rows_apart(self) -> bool:
        """Kinds that say so (tree ensembles), stored to predict in one thread."""
        kind = kind_of(self.estimator)
        if kind is None or not kind.rows_apart:
            return False
        threads = getattr(self.estimator, kind.threads_param or "n_jobs", None)
        return threads is None or threads == 1

    def use_for(self, n_rows: int) -> bool:
        return True

    def answer(self, Xt: NDArray[Any], *, with_proba: bool = False) -> Answer:
        return self._answer(Xt, with_proba, apart=False)

    def answer_part(self, Xt: NDArray[Any], *, with_proba: bool = False) -> Answer:
        """The answer for one part of a request answered on several threads at once
        (:mod:`ensembles.inference.row_parts`): the same bits as :meth:`answer`, with
        scikit-learn's gradient boosting walked outside the GIL
        (:mod:`ensembles.inference.boosted_sum`), so that the parts run side by side
        instead of one after the other.  That walk costs more CPU than the library's
        own (about a tenth for the bench's model, ``benchmarks/boosted_parts.py``),
        which is why a request answered in one call keeps the library's."""
        return self._answer(Xt, with_proba, apart=True)

    def answer_threads(
        self, Xt: NDArray[Any], threads: int, *, with_proba: bool = False
    ) -> Answer | None:
        """The answer for a big request in one call of the library on ``threads`` threads,
        the same bits as :meth:`answer` (XGBoost's trees:
        :mod:`ensembles.inference.library_threads`), else None (answer it in parts)."""
        twin = threaded_twin(self.estimator, threads)
        if twin is None:
            return None
        return self._answer(Xt, with_proba, apart=False, estimator=twin)

    def _answer(
        self,
        Xt: NDArray[Any],
        with_proba: bool,
        *,
        apart: bool,
        estimator: BaseEstimator | None = None,
    ) -> Answer:
        """``estimator``: the stored one's twin predicting on several threads (else it)."""
        estimator = self.estimator if estimator is None else estimator
        if self.task == "regression":
            values = forest_mean(estimator, Xt, "predict")
            raw = boosted_raw(estimator, Xt) if values is None and apart else None
            if raw is not None:  # gradient boosting's ``_raw_predict(X).ravel()``
                values = raw.ravel()
            elif values is None:
                values = np.asarray(estimator.predict(Xt))
            return Answer(values, None, SKLEARN)
        with_proba = with_proba and hasattr(estimator, "predict_proba")
        rule = _label_rule(estimator)
        if rule == "stacked" and not isinstance(estimator.classes_, list):  # single output
            return _stacked(estimator, Xt, with_proba)
        if rule in ("raw_ge", "raw_gt"):
            boosted = _boosted(estimator, Xt, rule == "raw_ge", with_proba, apart)
            if boosted is not None:
                return boosted
        by_argmax = _predicts_by_argmax(estimator, rule)
        if not (with_proba or by_argmax):
            return Answer(np.asarray(estimator.predict(Xt)), None, SKLEARN)
        proba = forest_mean(estimator, Xt, "predict_proba")
        if proba is None:
            proba = np.asarray(estimator.predict_proba(Xt), dtype=np.float64)
        if by_argmax:
            labels = np.asarray(estimator.classes_).take(np.argmax(proba, axis=1), axis=0)
        else:
            labels = np.asarray(estimator.predict(Xt))
        return Answer(labels, proba if with_proba else None, SKLEARN)


def _label_rule(estimator: BaseEstimator) -> LabelRule:
    kind = kind_of(estimator)
    return "predict" if kind is None else kind.labels


def _stacked(estimator: BaseEstimator, Xt: NDArray[Any], with_proba: bool) -> Answer:
    """Stacking's labels and probabilities from one pass over its members.

    scikit-learn computes ``final_estimator_.predict(transform(X))`` (labels decoded by
    ``classes_.take``) and ``final_estimator_.predict_proba(transform(X))``: the members'
    outputs, ``transform(X)``, are the costly part and are computed once here.
    """
    stacked = estimator.transform(Xt)
    final = estimator.final_estimator_
    labels = np.asarray(estimator.classes_).take(np.asarray(final.predict(stacked)), axis=0)
    proba = np.asarray(final.predict_proba(stacked), dtype=np.float64) if with_proba else None
    return Answer(labels, proba, SKLEARN)


def _boosted(
    estimator: BaseEstimator, Xt: NDArray[Any], at_zero: bool, with_proba: bool, apart: bool
) -> Answer | None:
    """Gradient boosting's labels (and probabilities) from one walk of its trees, else None.

    scikit-learn's ``predict`` and ``predict_proba`` each walk every tree for the raw
    scores (``decision_function``), then ``predict`` decides on them (binary: ``raw >= 0``
    for gradient boosting, ``raw > 0`` for histogram boosting; else the first maximum) and
    ``predict_proba`` applies the loss's ``predict_proba``.  Done here once, with those very
    functions: one walk instead of two, same bits.  ``apart``: one part of a request
    answered on several threads, scikit-learn's gradient boosting walked outside the GIL
    (:mod:`ensembles.inference.boosted_sum`).  The loss is private (``_loss``); if
    scikit-learn moves it, this returns None and both calls are made.  Labels alone: None
    unless the trees are walked outside the GIL (``predict`` is one walk already).
    """
    to_proba = getattr(getattr(estimator, "_loss", None), "predict_proba", None)
    if with_proba and to_proba is None:
        return None
    summed = boosted_raw(estimator, Xt) if apart else None
    if summed is None and not with_proba:
        return None
    if summed is None:
        raw = np.asarray(estimator.decision_function(Xt))
    else:  # ``decision_function``'s shape: one column squeezed
        raw = summed.ravel() if summed.shape[1] == 1 else summed
    if raw.ndim == 1:
        positive = raw >= 0 if at_zero else raw > 0
        encoded = positive.astype(np.intp)
    else:
        encoded = np.argmax(raw, axis=1)
    labels = np.asarray(estimator.classes_)[encoded]
    if not with_proba or to_proba is None:
        return Answer(labels, None, SKLEARN)
    return Answer(labels, np.asarray(to_proba(raw), dtype=np.float64), SKLEARN)


def _predicts_by_argmax(estimator: BaseEstimator, rule: LabelRule) -> bool:
    """Is ``predict`` literally ``classes_.take(argmax(predict_proba(X)))`` in scikit-learn?"""
    if rule == "argmax_if_soft":
        return bool(estimator.voting == "soft")
    return rule == "argmax" and getattr(estimator, "n_outputs_", 1) == 1
