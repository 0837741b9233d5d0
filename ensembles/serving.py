"""A stored version made ready to answer: the engine chosen at creation, the cheapest exact
preprocessing, and one call that answers a request from the faster engine for its size.

Built once when a version is loaded into the service's cache (:func:`prepare`), then
shared by every request (it holds no per-request state):

* the compiled engine (:mod:`ensembles.compiled`: a tree ensemble, or a voting, stacking
  or bagging ensemble with its tree members compiled) is re-created only if the version's
  metadata recorded that it passed the fidelity check when the version was created; a
  version without that record (older, refused, or without tree models) is served by
  scikit-learn, as is one whose engine no longer answers the same at load time;
* when the preprocessing only passes numeric columns through (tables of numbers without
  missing values), stacking the request's columns as float64 is exactly what the
  ColumnTransformer returns (checked here once), so rows never become a DataFrame;
* scikit-learn answers with the ensemble step on the preprocessed rows, as the Pipeline
  does; for estimators whose ``predict`` is by scikit-learn's own code the first maximum
  of ``predict_proba`` (forests, bagging, soft voting), labels come from the
  probabilities already computed rather than from a second pass over the members,
  stacking's members are asked once for both its labels and its probabilities, and
  gradient boosting's trees are walked once for both (:func:`_boosted`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator
from sklearn.ensemble import (
    BaggingClassifier,
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
    StackingClassifier,
    VotingClassifier,
)
from sklearn.pipeline import Pipeline

from ensembles.catalog import Task
from ensembles.compiled import (
    SKLEARN,
    Answer,
    Compiled,
    FidelityReport,
    passthrough_columns,
    rebuild,
    stack_columns,
)

__all__ = ["Rows", "Servable", "n_rows", "prepare"]

Rows = pd.DataFrame | Mapping[str, ArrayLike]
FloatArray = NDArray[np.float64]
_ARGMAX_PREDICT = (RandomForestClassifier, ExtraTreesClassifier, BaggingClassifier)
_BOOSTING_CLASSIFIERS = (GradientBoostingClassifier, HistGradientBoostingClassifier)
_PROBE_VALUES = (0.0, 1.5, -2.25, 1e300, 3.0000000000000004)


@dataclass(frozen=True, eq=False)
class Servable:
    """A fitted pipeline and how this service answers with it (see the module doc)."""

    pipeline: Pipeline
    task: Task
    compiled: Compiled | None = None
    passthrough: tuple[str, ...] | None = None  # columns whose float64 stack is the input
    inference: FidelityReport | None = field(default=None, repr=False)

    @property
    def estimator(self) -> BaseEstimator:
        return self.pipeline[-1]

    def engine_for(self, n: int) -> str:
        """The engine that answers a request of ``n`` rows."""
        compiled = self.compiled
        return compiled.engine if compiled is not None and compiled.use_for(n) else SKLEARN

    def native_for(self, n: int) -> bool:
        """Does a request of ``n`` rows stay in native code (GTIL, numpy) throughout?  Such
        requests take tens of microseconds of CPU; any scikit-learn member takes more."""
        compiled = self.compiled
        return compiled is not None and compiled.use_for(n) and compiled.native

    def transform(self, rows: Rows) -> NDArray[Any]:
        """The preprocessed rows, exactly as the pipeline's preprocessing gives them."""
        if self.passthrough is not None:
            return stack_columns(rows, self.passthrough)
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(dict(rows))
        return np.asarray(self.pipeline[:-1].transform(frame))

    def answer(self, rows: Rows, *, with_proba: bool = False) -> Answer:
        """The pipeline's predictions (and probabilities when asked) for ``rows``."""
        Xt = self.transform(rows)
        compiled = self.compiled
        if compiled is not None and compiled.use_for(Xt.shape[0]):
            if self.task == "regression":
                return Answer(compiled.predict(Xt), None, compiled.engine)
            labels, proba = compiled.predict_with_proba(Xt)
            return Answer(labels, proba if with_proba else None, compiled.engine)
        estimator = self.estimator
        if self.task == "regression":
            return Answer(np.asarray(estimator.predict(Xt)), None, SKLEARN)
        with_proba = with_proba and hasattr(estimator, "predict_proba")
        if _is_stacking(estimator):
            return _stacked(estimator, Xt, with_proba)
        if with_proba:
            boosted = _boosted(estimator, Xt)
            if boosted is not None:
                return boosted
        if not (with_proba or _predicts_by_argmax(estimator)):
            return Answer(np.asarray(estimator.predict(Xt)), None, SKLEARN)
        proba = np.asarray(estimator.predict_proba(Xt), dtype=np.float64)
        if _predicts_by_argmax(estimator):
            labels = np.asarray(estimator.classes_).take(np.argmax(proba, axis=1), axis=0)
        else:
            labels = np.asarray(estimator.predict(Xt))
        return Answer(labels, proba if with_proba else None, SKLEARN)


def _is_stacking(estimator: BaseEstimator) -> bool:
    """A single-output StackingClassifier (its ``classes_`` is one array)."""
    return isinstance(estimator, StackingClassifier) and not isinstance(estimator.classes_, list)


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


def _boosted(estimator: BaseEstimator, Xt: NDArray[Any]) -> Answer | None:
    """Gradient boosting's labels and probabilities from one walk of its trees, else None.

    scikit-learn's ``predict`` and ``predict_proba`` each walk every tree for the raw
    scores (``decision_function``), then ``predict`` decides on them (binary: ``raw >= 0``
    for gradient boosting, ``raw > 0`` for histogram boosting; else the first maximum) and
    ``predict_proba`` applies the loss's ``predict_proba``.  Done here once, with those very
    functions: a 10,000-row request costs one walk instead of two, same bits.  The loss is
    private (``_loss``); if scikit-learn moves it, this returns None and both calls are made.
    """
    if not isinstance(estimator, _BOOSTING_CLASSIFIERS):
        return None
    to_proba = getattr(getattr(estimator, "_loss", None), "predict_proba", None)
    if to_proba is None:
        return None
    raw = np.asarray(estimator.decision_function(Xt))
    if raw.ndim == 1:
        positive = raw >= 0 if isinstance(estimator, GradientBoostingClassifier) else raw > 0
        encoded = positive.astype(np.intp)
    else:
        encoded = np.argmax(raw, axis=1)
    labels = np.asarray(estimator.classes_)[encoded]
    return Answer(labels, np.asarray(to_proba(raw), dtype=np.float64), SKLEARN)


def _predicts_by_argmax(estimator: BaseEstimator) -> bool:
    """Is ``predict`` literally ``classes_.take(argmax(predict_proba(X)))`` in scikit-learn?"""
    if isinstance(estimator, VotingClassifier):
        return bool(estimator.voting == "soft")
    return isinstance(estimator, _ARGMAX_PREDICT) and getattr(estimator, "n_outputs_", 1) == 1


def n_rows(rows: Rows) -> int:
    if isinstance(rows, pd.DataFrame):
        return len(rows)
    return len(np.asarray(next(iter(rows.values())))) if rows else 0


def prepare(pipeline: Pipeline, task: Task, recorded: Mapping[str, Any] | None) -> Servable:
    """The servable form of a stored version, given the verdict recorded at its creation.

    ``recorded`` is the version's ``inference`` metadata (None for versions made before
    the compiled engine existed: scikit-learn serves them).  Call from a worker thread:
    re-creating an engine takes tens of milliseconds.
    """
    compiled: Compiled | None = None
    report: FidelityReport | None = None
    if recorded is not None:
        compiled, report = rebuild(pipeline, task, recorded)
    if compiled is not None and compiled.passthrough is not None:
        passthrough: tuple[str, ...] | None = compiled.passthrough
    else:
        passthrough = _checked_passthrough(pipeline)
    return Servable(pipeline, task, compiled, passthrough, report)


def _checked_passthrough(pipeline: Pipeline) -> tuple[str, ...] | None:
    """The passthrough columns, if stacking them equals the preprocessing on probe rows."""
    columns = passthrough_columns(pipeline)
    if columns is None:
        return None
    probe = pd.DataFrame({c: np.asarray(_PROBE_VALUES, dtype=np.float64) for c in columns})
    try:
        expected = np.asarray(pipeline[:-1].transform(probe), dtype=np.float64)
    except (ValueError, TypeError):
        return None
    same = np.array_equal(stack_columns(probe, columns), expected, equal_nan=True)
    return columns if same else None
