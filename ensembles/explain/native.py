"""The boosting libraries' own exact TreeSHAP, as ``explain`` traits their kinds declare:
XGBoost's ``pred_contribs``, LightGBM's ``pred_contrib``, CatBoost's ``ShapValues`` (each
equal to shap's ``TreeExplainer`` on the same model, and faster: no tree conversion).

Each returns the attribution of the raw scores (classifier margins, regression values),
the space those libraries add trees in, and None for any other output (probabilities
after a link are not a sum of trees: an ensemble that needs them falls back to
permutation).  Each library is imported when its model is explained (the ``boosting``
extra): nothing here needs it installed.  ``*_margin`` read the raw scores the
explanation is checked against (the libraries' classifiers have no
``decision_function``).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import is_classifier

from ensembles.explain.attribution import Attribution, FloatArray, Output


def xgboost_attribution(estimator: Any, Xt: NDArray[Any], output: Output) -> Attribution | None:
    if not _raw(estimator, output):
        return None
    booster = estimator.get_booster()
    matrix = import_module("xgboost").DMatrix(Xt)
    best = getattr(estimator, "best_iteration", None)
    rounds = (0, best + 1) if best is not None else (0, 0)
    contributions = booster.predict(matrix, pred_contribs=True, iteration_range=rounds)
    return bias_last(np.asarray(contributions, dtype=np.float64))


def xgboost_margin(estimator: Any, Xt: NDArray[Any]) -> FloatArray:
    margin = np.asarray(estimator.predict(Xt, output_margin=True), dtype=np.float64)
    return margin.reshape(len(Xt), -1)


FEW_ROWS = 64  # LightGBM explains fewer rows than this on one thread


def lightgbm_attribution(estimator: Any, Xt: NDArray[Any], output: Output) -> Attribution | None:
    if not _raw(estimator, output):
        return None
    # OpenMP threads cost a few rows ~10 ms of hand-offs on a busy machine: one thread.
    threads = 1 if len(Xt) < FEW_ROWS else 0
    predicted = estimator.predict(Xt, pred_contrib=True, num_threads=threads)
    contributions = np.asarray(predicted, dtype=np.float64)
    n_outputs = contributions.shape[1] // (Xt.shape[1] + 1)
    return bias_last(contributions.reshape(len(Xt), n_outputs, -1))


def lightgbm_margin(estimator: Any, Xt: NDArray[Any]) -> FloatArray:
    margin = np.asarray(estimator.predict(Xt, raw_score=True), dtype=np.float64)
    return margin.reshape(len(Xt), -1)


def catboost_attribution(estimator: Any, Xt: NDArray[Any], output: Output) -> Attribution | None:
    if not _raw(estimator, output):
        return None
    contributions = estimator.get_feature_importance(data=_pool(estimator, Xt), type="ShapValues")
    return bias_last(np.asarray(contributions, dtype=np.float64))


def _pool(estimator: Any, Xt: NDArray[Any]) -> Any:
    """The rows as CatBoost read them in training: its categorical columns as integer
    codes (explanations get the encoded rows as floats, which CatBoost refuses there)."""
    categorical = list(estimator.get_cat_feature_indices())
    if not categorical:
        return import_module("catboost").Pool(Xt)
    rows = np.asarray(Xt, dtype=object)
    for column in categorical:
        rows[:, column] = np.asarray(Xt[:, column], dtype=np.float64).astype(np.int64)
    return import_module("catboost").Pool(rows, cat_features=categorical)


def catboost_margin(estimator: Any, Xt: NDArray[Any]) -> FloatArray:
    raw = estimator.predict(_pool(estimator, Xt), prediction_type="RawFormulaVal")
    margin = np.asarray(raw, np.float64)
    return margin.reshape(len(Xt), -1)


def _raw(estimator: Any, output: Output) -> bool:
    return output == ("margin" if is_classifier(estimator) else "value")


def bias_last(contributions: FloatArray) -> Attribution:
    """(n, p+1) or (n, k, p+1) contributions whose last column is the bias (the expected
    raw score, the same on every row) as an attribution."""
    if contributions.ndim == 2:
        contributions = contributions[:, None, :]
    phi = np.ascontiguousarray(contributions[:, :, :-1])
    base = contributions[0, :, -1] if len(contributions) else np.zeros(contributions.shape[1])
    return Attribution(np.asarray(base, dtype=np.float64), phi, "tree_shap")
