"""Exact contributions of a linear model: coefficient times the column's distance from the
reference row; the base is the model's output at the reference row (shap's
``LinearExplainer`` with that row as its background gives the same values)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import is_classifier

from ensembles.explain.attribution import Attribution, Budget, Output


def linear_attribution(
    estimator: Any, Xt: NDArray[Any], output: Output, budget: Budget
) -> Attribution | None:
    """A regressor's values or a classifier's margins; None for any other output
    (probabilities through a link are not linear)."""
    wanted = "margin" if is_classifier(estimator) else "value"
    if output != wanted or not hasattr(estimator, "coef_"):
        return None
    coef = np.atleast_2d(np.asarray(estimator.coef_, dtype=np.float64))
    intercept = np.broadcast_to(
        np.asarray(estimator.intercept_, dtype=np.float64), (coef.shape[0],)
    )
    X = np.asarray(Xt, dtype=np.float64)
    reference = np.zeros(X.shape[1]) if budget.reference is None else budget.reference
    phi = coef[None, :, :] * (X - reference)[:, None, :]
    return Attribution(coef @ reference + intercept, phi, "linear")


def identity_attribution(Xt: NDArray[Any], budget: Budget) -> Attribution:
    """The encoded columns themselves as outputs (stacking's passthrough): each column is
    all of its own output."""
    X = np.asarray(Xt, dtype=np.float64)
    reference = np.zeros(X.shape[1]) if budget.reference is None else budget.reference
    phi = np.zeros((X.shape[0], X.shape[1], X.shape[1]))
    diagonal = np.arange(X.shape[1])
    phi[:, diagonal, diagonal] = X - reference
    return Attribution(np.array(reference, dtype=np.float64), phi, "linear")
