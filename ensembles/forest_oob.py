"""A bootstrapped forest's own OOB attributes, from the members' pass instead of a pass
of its own at the end of its fit.

``RandomForestClassifier(oob_score=True).fit`` ends with ``_compute_oob_predictions``:
each tree predicts its out-of-bag rows, one tree after the other on one thread, in the
table's order, while the other cores idle (~2.2 s of CPU for 100 trees on 200,000 rows,
the tail of the fit).  The service walks every member over every training row right
after, for all its figures (:mod:`ensembles.member_pass`), on every core and in the order
of the first tree's leaves, and tallies the same out-of-bag sums and counts there.  So
the service fits a bootstrapped forest with ``oob_score=False`` (:func:`fit_without_oob`)
and gives it the attributes scikit-learn's fit would have (:func:`settle`):
``oob_decision_function_`` or ``oob_prediction_`` and ``oob_score_``, the same bits
(each row's sum over its out-of-bag trees in tree order, divided by their number, 1 for
a row no tree left out, as scikit-learn does), and ``oob_score=True`` again, so the
stored model is the one the fit with ``oob_score=True`` gives, pickle byte for byte
(``tests/unit/test_forest_oob.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, is_classifier
from sklearn.metrics import accuracy_score, r2_score

# Set on a forest fitted without its OOB pass, until settle() gives it the attributes.
_PENDING = "_ensemble_oob_pending"


def fit_without_oob(ensemble: BaseEstimator, own_oob: bool) -> None:
    """Before the fit: no OOB pass in it; ``own_oob`` (a bootstrapped forest): the OOB
    attributes are owed, :func:`settle` gives them."""
    ensemble.set_params(oob_score=False)
    if own_oob:
        setattr(ensemble, _PENDING, True)


def pending(ensemble: BaseEstimator) -> bool:
    """Whether the forest still owes the OOB attributes of its fit."""
    return bool(getattr(ensemble, _PENDING, False))


def settle(
    ensemble: BaseEstimator,
    sums: NDArray[Any],
    counts: NDArray[np.int64],
    y: NDArray[Any],
    codes: NDArray[np.intp] | None,
) -> None:
    """Give a pending forest scikit-learn's OOB attributes from the members' tallies
    (``sums``: each row's summed probabilities or values over the trees that left it
    out, in tree order; ``counts``: how many did; ``y``: the training values of a
    regression; ``codes``: a classification's, each label's index in ``classes_``)."""
    if not pending(ensemble):
        return
    delattr(ensemble, _PENDING)  # before the attributes: they come after the fit's in order
    divisor = np.where(counts == 0, 1, counts)  # scikit-learn's: rows never out of bag
    ensemble.set_params(oob_score=True)
    if is_classifier(ensemble):
        assert codes is not None
        proba = np.asarray(sums, dtype=np.float64) / divisor[:, np.newaxis]
        encoded = np.asarray(codes, dtype=np.float64).reshape(-1, 1)  # the fit's y
        ensemble.oob_decision_function_ = proba
        ensemble.oob_score_ = accuracy_score(encoded, np.argmax(proba, axis=1))
    else:
        values = np.asarray(sums, dtype=np.float64) / divisor
        ensemble.oob_prediction_ = values
        target = np.ascontiguousarray(np.asarray(y).reshape(-1, 1), dtype=np.float64)
        ensemble.oob_score_ = r2_score(target, values)
