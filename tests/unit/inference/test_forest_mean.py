"""A forest's trees summed without joblib's wrapper (``forest_mean``): bit for bit the
library's own answer, for forests of every class, with missing values, and through the
scikit-learn engine; what it does not cover is left to the library."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from sklearn import datasets
from sklearn.ensemble import (
    BaggingClassifier,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

from ensembles.inference.engines import SklearnEngine
from ensembles.inference.forest_mean import forest_mean

CLASSIFIERS = [RandomForestClassifier, ExtraTreesClassifier]
REGRESSORS = [RandomForestRegressor, ExtraTreesRegressor]


def with_missing(X: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    X = X.copy()
    X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    return X


@pytest.mark.parametrize("cls", CLASSIFIERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", ["iris", "breast_cancer"])
@pytest.mark.parametrize("missing", [False, True], ids=["finite", "missing"])
def test_probabilities_are_the_forest_s_own_bits(cls: type, name: str, missing: bool) -> None:
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    X = with_missing(X) if missing else X
    forest = cls(n_estimators=25, random_state=0).fit(X, y)
    got = forest_mean(forest, X, "predict_proba")
    assert got is not None and np.array_equal(got, forest.predict_proba(X))
    answer = SklearnEngine(forest, "classification").answer(X, with_proba=True)
    assert np.array_equal(answer.predictions, forest.predict(X))
    assert answer.probabilities is not None
    assert np.array_equal(answer.probabilities, forest.predict_proba(X))


@pytest.mark.parametrize("cls", REGRESSORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("missing", [False, True], ids=["finite", "missing"])
def test_values_are_the_forest_s_own_bits(cls: type, missing: bool) -> None:
    X, y = datasets.load_diabetes(return_X_y=True)
    X = with_missing(X) if missing else X
    forest = cls(n_estimators=25, random_state=0).fit(X, y)
    got = forest_mean(forest, X, "predict")
    assert got is not None and np.array_equal(got, forest.predict(X))
    assert np.array_equal(SklearnEngine(forest, "regression").answer(X).predictions, got)


def test_what_it_does_not_cover_is_left_to_the_library() -> None:
    X, y = datasets.load_iris(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    threaded = copy.deepcopy(forest).set_params(n_jobs=2)  # trees added as threads finish
    two_outputs = RandomForestClassifier(n_estimators=5, random_state=0).fit(
        X, np.column_stack([y, y])
    )
    bagging = BaggingClassifier(n_estimators=5, random_state=0).fit(X, y)
    for estimator in (threaded, two_outputs, bagging):
        assert forest_mean(estimator, X, "predict_proba") is None
    assert forest_mean(forest, X, "predict_proba") is not None
