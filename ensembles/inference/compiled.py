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

from dataclasses import dataclass, field
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
    decide,
    gtil_scores,
    import_model,
    link,
    plan_for,
)
from ensembles.tasks import Task

__all__ = ["CompiledModel", "restore_model"]

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
        X = self._input(Xt)
        if X is None:  # non-finite after the float32 cast: scikit-learn decides (or refuses)
            return estimator.predict(Xt), np.asarray(estimator.predict_proba(Xt), np.float64)
        scores = self._scores(X)
        proba = self._link(scores)
        index, ambiguous = decide(proba if self.plan.decision == "proba" else scores, self.plan)
        labels = np.asarray(estimator.classes_).take(index)
        if np.count_nonzero(ambiguous):  # (``any()`` goes through numpy's Python wrapper)
            labels[ambiguous] = estimator.predict(np.asarray(Xt)[ambiguous])
        return labels, proba

    def _values(self, Xt: ArrayLike) -> FloatArray:
        X = self._input(Xt)
        if X is None:
            return np.asarray(self.estimator.predict(Xt), dtype=np.float64)
        return self._link(self._scores(X))[:, 0]

    def _input(self, Xt: ArrayLike) -> FloatArray | None:
        """The rows the engine must see to compare as scikit-learn does (None: can't)."""
        X = np.asarray(Xt, dtype=np.float64)
        expected = self._n_features
        if X.ndim != 2 or X.shape[1] != expected:
            shape = X.shape[1] if X.ndim == 2 else X.shape
            raise ValueError(f"X has {shape} features, but {self.kind} expects {expected}")
        return cast_rows(X, self.plan)

    @cached_property
    def _n_features(self) -> int:
        """The estimator's feature count, read once: XGBoost's ``n_features_in_`` asks its
        booster through ctypes on every read (a few microseconds of a one-row answer)."""
        return int(self.estimator.n_features_in_)

    def _scores(self, X: FloatArray) -> FloatArray:
        return gtil_scores(self.model, X, self.plan, self.threads)

    def _link(self, scores: FloatArray) -> FloatArray:
        return link(scores, self.plan)


def restore_model(pipeline: Pipeline, task: Task, max_rows: int) -> CompiledModel:
    """The compiled engine of a pipeline whose step was compiled before (raises one of
    ``gtil.IMPORT_ERRORS``, or ValueError if the step is no longer supported)."""
    plan = plan_for(pipeline[-1], task)
    if isinstance(plan, str):
        raise ValueError(plan)
    model = import_model(pipeline[-1])
    return CompiledModel(ENGINE, task, type(pipeline[-1]).__name__, max_rows, pipeline, model, plan)
