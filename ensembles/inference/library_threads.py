"""XGBoost's big requests answered by the library on several threads in one call, with the
same bits as the stored one-thread model.

Why: a 10,000-row XGBoost request is answered by the library's own predictor (GTIL walks
it three times slower, its crossover is about a hundred rows), and the stored model
predicts on one thread (``n_jobs`` 1, so that answers are repeatable and concurrent
requests share the cores).  The request was cut in two parts answered on two threads
(:mod:`ensembles.inference.row_parts`), each a whole ``predict_proba`` call of its own.
XGBoost's predictor releases the GIL and splits rows among its own OpenMP threads itself:
one call of a twin of the estimator whose booster predicts on ``threads`` threads costs
less CPU than the parts (one Python wrapper instead of two: about 0.7 ms of 8.9 per
10,000 rows of 100 trees) and less wall.  Figures: docs/performance.md.

Exactness: XGBoost's CPU predictor sums each row's trees in tree order, in the thread that
holds that row, whatever the number of threads: a row's margin, and so its probabilities
and label, are the same bits on one thread or several.  The twin is the estimator itself
(a shallow copy: every attribute and the sklearn wrapper's code are its own) but for its
booster, a copy with ``nthread`` set, so nothing of the stored model changes.  Only
XGBoost's scikit-learn classes with a tree booster (``gbtree``: ``dart`` predicts with
dropout weights, ``gblinear`` has no trees) are twinned; anything else is None.
"""

from __future__ import annotations

import copy
import threading
import weakref
from typing import Any

from ensembles.catalog import kind_of

__all__ = ["threaded_twin"]

_TWINS: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def threaded_twin(estimator: Any, threads: int) -> Any | None:
    """The estimator predicting on ``threads`` threads (made once per estimator and count),
    else None (not XGBoost's trees, or one thread)."""
    if threads < 2 or not _twinnable(estimator):
        return None
    with _LOCK:
        kept = _TWINS.setdefault(estimator, {})
        twin = kept.get(threads)
        if twin is None:
            twin = _twin(estimator, threads)
            kept[threads] = twin
    return twin


def _twinnable(estimator: Any) -> bool:
    kind = kind_of(estimator)
    if kind is None or kind.compiled != "xgboost":
        return False
    booster = getattr(estimator, "booster", None)
    return booster in (None, "gbtree") and hasattr(estimator, "get_booster")


def _twin(estimator: Any, threads: int) -> Any:
    booster = copy.copy(estimator.get_booster())  # XGBoost's copy: the model serialized
    booster.set_param({"nthread": threads})
    twin = copy.copy(estimator)
    twin._Booster = booster  # the wrapper's own attribute (get_booster reads it)
    twin.n_jobs = threads  # said as the wrapper says it (its DMatrix fallback reads it)
    return twin
