"""A scikit-learn forest's answer without joblib's wrapper around each tree: the same sum
in the same order, so the same bits.

Why: a forest averages its trees through joblib's ``Parallel`` even with ``n_jobs=1``, and
scikit-learn's wrapper of each of those tasks (a config context and a warnings filter per
tree) cost about 110 microseconds of CPU per tree: 11 ms per call of a 100-tree forest,
whatever the rows (13 ms for 10 rows; 39 ms for 10,000, of which the trees' own work is
29 ms).  Figures: docs/performance.md.

Done here as the library does it with one job: zeros, each tree's ``predict_proba`` (or
``predict``) on the validated rows added in the order of ``estimators_``, then divided by
their count.  Only for the forest kinds (``compiled == "forest"`` in the catalog) with
one output and one job (with more jobs the library adds the trees in whatever order its
threads finish); anything else is left to the library (None).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ensembles.catalog import kind_of

__all__ = ["forest_mean"]

FloatArray = NDArray[np.float64]


def forest_mean(
    estimator: Any, Xt: NDArray[Any], method: Literal["predict_proba", "predict"]
) -> FloatArray | None:
    """The forest's ``method`` on ``Xt`` (probabilities or values), else None."""
    kind = kind_of(estimator)  # scikit-learn's forests (random_forest, extra_trees)
    if kind is None or kind.compiled != "forest" or getattr(estimator, "n_outputs_", 1) != 1:
        return None
    if estimator.n_jobs not in (None, 1):
        return None
    validate = getattr(estimator, "_validate_X_predict", None)  # the forest's own checks
    trees = getattr(estimator, "estimators_", None)
    if validate is None or not trees:
        return None
    X = validate(Xt)
    shape = (X.shape[0], int(estimator.n_classes_)) if method == "predict_proba" else X.shape[0]
    out = np.zeros(shape, dtype=np.float64)
    for tree in trees:
        out += getattr(tree, method)(X, check_input=False)
    out /= len(trees)
    return out
