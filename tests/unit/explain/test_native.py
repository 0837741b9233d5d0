"""The boosting libraries' own TreeSHAP (the ``explain`` traits their kinds declare) on
their estimators fitted directly: equal to shap's TreeExplainer, adding up to the raw
scores, refusing outputs that are not a sum of trees."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import shap
from sklearn import datasets

from ensembles.explain import native

catboost = pytest.importorskip("catboost")
lightgbm = pytest.importorskip("lightgbm")
xgboost = pytest.importorskip("xgboost")

TOL = 1e-6
Case = tuple[Any, Callable[..., Any], Callable[..., Any]]


def _cases(n_classes: int) -> list[Case]:
    if n_classes == 0:
        return [
            (xgboost.XGBRegressor(n_estimators=20, max_depth=3), *_xgb()),
            (lightgbm.LGBMRegressor(n_estimators=20, verbose=-1), *_lgb()),
            (
                catboost.CatBoostRegressor(
                    iterations=20, depth=3, verbose=0, allow_writing_files=False
                ),
                *_cat(),
            ),
        ]
    return [
        (xgboost.XGBClassifier(n_estimators=20, max_depth=3), *_xgb()),
        (lightgbm.LGBMClassifier(n_estimators=20, verbose=-1), *_lgb()),
        (
            catboost.CatBoostClassifier(
                iterations=20, depth=3, verbose=0, allow_writing_files=False
            ),
            *_cat(),
        ),
    ]


def _xgb() -> tuple[Callable[..., Any], Callable[..., Any]]:
    return native.xgboost_attribution, native.xgboost_margin


def _lgb() -> tuple[Callable[..., Any], Callable[..., Any]]:
    return native.lightgbm_attribution, native.lightgbm_margin


def _cat() -> tuple[Callable[..., Any], Callable[..., Any]]:
    return native.catboost_attribution, native.catboost_margin


def _data(n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    if n_classes == 0:
        return datasets.load_diabetes(return_X_y=True)
    X, y = datasets.load_wine(return_X_y=True)
    if n_classes == 2:
        return X[y < 2], y[y < 2]
    return X, y


@pytest.mark.parametrize("n_classes", [0, 2, 3], ids=["regression", "binary", "multiclass"])
def test_native_treeshap_equals_shap_and_adds_up_to_the_raw_scores(n_classes: int) -> None:
    X, y = _data(n_classes)
    rows = X[:30]
    for model, attribution_of, margin_of in _cases(n_classes):
        model.fit(X, y)
        output = "value" if n_classes == 0 else "margin"
        found = attribution_of(model, rows, output)
        assert found is not None and found.method == "tree_shap"
        raw = (
            np.asarray(model.predict(rows), dtype=np.float64).reshape(len(rows), -1)
            if n_classes == 0
            else margin_of(model, rows)
        )
        # XGBoost predicts in float32: the sums hold to its precision (relative 1e-6).
        np.testing.assert_allclose(found.outputs(), raw, rtol=TOL, atol=TOL, err_msg=str(model))
        explainer = shap.TreeExplainer(model)
        values = np.asarray(explainer.shap_values(rows, check_additivity=False))
        phi = values[:, None, :] if values.ndim == 2 else values.transpose(0, 2, 1)
        np.testing.assert_allclose(found.phi, phi, rtol=TOL, atol=TOL, err_msg=str(model))
        if n_classes:
            assert attribution_of(model, rows, "proba") is None
