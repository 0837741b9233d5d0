"""The engine check's reference answers on training rows the fit already answered.

The check compares the compiled engine with the estimator's own answers on a sample of
the training rows and on probe rows (:mod:`ensembles.inference.compiling`).  A boosting
library that kept its answers on the rows it was fitted on (``FitAnswers.train``:
LightGBM's score updaters, read while it fits, :mod:`ensembles.kinds.lightgbm_scores`)
has already given ``predict_proba`` (or ``predict``) on every training row, the same
bits, which the fit checked against the library's own ``predict_proba`` on a spread
sample before keeping them.  Asking the library again for the check's 10,000 training
rows was that work done twice: ~0.18 s of CPU of a 500-round LightGBM's check on
200,000 rows (its 18,800 check rows: 0.34 s), on the job's critical path beside the
figures.  So the sampled training rows take those answers, the probe rows are asked as
before, and the compiled engine is compared with the same numbers on the same rows.

The kept answers are taken when they are there by the time the probe rows are answered
(they are read and checked right after the fit, while the check imports the model and
makes its probes), and only for what they are: probabilities of a classifier whose
labels are their first maximum (``predict`` takes them so), or a regressor's values.
Otherwise the training rows are asked as well, as before: the same report either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator

from ensembles.catalog import kind_of
from ensembles.inference.engines import SKLEARN, Answer
from ensembles.tasks import Task

__all__ = ["FittedRows", "KnownAnswers", "own_answers"]

# The fit's own answers on its training rows, in their order, when known now (None: not
# kept, or not yet): a classifier's ``predict_proba``, a regressor's ``predict``.
KnownAnswers = Callable[[], NDArray[np.float64] | None]


@dataclass(frozen=True)
class FittedRows:
    """The check's first ``count`` rows are training rows: the ones at ``positions``
    among the ``total`` rows the model was fitted on (None: all of them, in order)."""

    count: int
    positions: NDArray[np.intp] | None
    total: int
    known: KnownAnswers


def own_answers(
    estimator: BaseEstimator,
    task: Task,
    rows: NDArray[Any],
    fitted: FittedRows | None,
    ask: Callable[[NDArray[Any]], Answer],
) -> Answer:
    """The estimator's answers on ``rows`` (``ask``: the library asked), the training
    rows among them from the fit's kept answers when they can be (see the module)."""
    if fitted is None or not 0 < fitted.count < len(rows) or not _usable(estimator, task):
        return ask(rows)
    rest = ask(rows[fitted.count :])  # the probe rows: asked first, the answers meanwhile read
    known = fitted.known()
    if known is None or known.shape[0] != fitted.total:
        return _joined(ask(rows[: fitted.count]), rest)
    head = known if fitted.positions is None else known[fitted.positions]
    if head.shape[0] != fitted.count:
        return _joined(ask(rows[: fitted.count]), rest)
    if task == "classification":
        proba = np.asarray(head, dtype=np.float64)
        if proba.ndim != 2 or rest.probabilities is None:
            return _joined(ask(rows[: fitted.count]), rest)
        labels = np.asarray(estimator.classes_).take(np.argmax(proba, axis=1), axis=0)
        return _joined(Answer(labels, proba, SKLEARN), rest)
    values = np.asarray(head, dtype=np.float64)
    return _joined(Answer(values, None, SKLEARN), rest)


def _usable(estimator: BaseEstimator, task: Task) -> bool:
    """A regressor, or a classifier whose ``predict`` is the first maximum of its
    probabilities (the labels are then made from the kept probabilities)."""
    if task == "regression":
        return True
    kind = kind_of(estimator)
    return kind is not None and kind.labels == "argmax"


def _joined(head: Answer, rest: Answer) -> Answer:
    """``head``'s rows, then ``rest``'s, as one answer."""
    labels = np.concatenate([head.predictions, rest.predictions])
    if head.probabilities is None or rest.probabilities is None:
        return Answer(labels, None, SKLEARN)
    return Answer(labels, np.vstack([head.probabilities, rest.probabilities]), SKLEARN)
