"""scikit-learn's gradient boosting summed tree by tree outside the GIL (``boosted_sum``)
for the parts of a big request: bit for bit the library's own raw scores, labels,
probabilities and values, for both classes and every loss; the parts never go through
``predict_stages`` (which holds the GIL from the first tree to the last, so parts ran
one after the other); a request answered in one call keeps the library's own walk."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import datasets
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.ensemble import _gb as sklearn_gb

from ensembles.inference.boosted_sum import boosted_raw
from ensembles.inference.engines import SklearnEngine
from ensembles.inference.row_parts import RowParts

CLASSIFIERS: dict[str, tuple[dict[str, Any], str]] = {
    "binary": ({}, "breast_cancer"),
    "exponential": ({"loss": "exponential", "learning_rate": 0.37}, "breast_cancer"),
    "multiclass": ({"subsample": 0.7, "max_depth": 5}, "iris"),
    "init_zero": ({"init": "zero"}, "iris"),
    "few_steep_stages": ({"n_estimators": 7, "learning_rate": 1.3}, "breast_cancer"),
}
REGRESSORS: dict[str, dict[str, Any]] = {
    "squared_error": {},
    "huber": {"loss": "huber", "max_depth": 6},
    "quantile": {"loss": "quantile", "alpha": 0.3},
    "absolute_error": {"loss": "absolute_error", "max_leaf_nodes": 9},
    "init_zero": {"init": "zero", "learning_rate": 0.77},
}


def rows_around(X: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The training rows, rows scaled around them and rows drawn from their spread."""
    rng = np.random.default_rng(0)
    drawn = rng.normal(size=(400, X.shape[1])) * X.std(axis=0) + X.mean(axis=0)
    return np.concatenate([X, X * rng.uniform(0.5, 1.5, X.shape), drawn])


def own_raw(model: Any, X: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.asarray(model._raw_predict(np.ascontiguousarray(X, dtype=np.float32)))


def refuse_predict_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's GIL-holding walk refused from here on."""

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("predict_stages holds the GIL for the whole walk")

    monkeypatch.setattr(sklearn_gb, "predict_stages", refused)


def count_predict_stages(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each call of scikit-learn's own walk."""
    walk = sklearn_gb.predict_stages
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return walk(*args, **kwargs)

    monkeypatch.setattr(sklearn_gb, "predict_stages", counted)
    return calls


@pytest.mark.parametrize("case", CLASSIFIERS)
def test_a_classifier_s_parts_are_the_library_s_bits(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    params, name = CLASSIFIERS[case]
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    if case == "few_steep_stages":
        y = np.where(y == 1, "yes", "no")
    model = GradientBoostingClassifier(random_state=0, **params).fit(X, y)
    Z = rows_around(X)
    expected_raw = (model.decision_function(Z), model.predict(Z), model.predict_proba(Z))
    refuse_predict_stages(monkeypatch)
    raw = boosted_raw(model, Z)
    assert raw is not None and raw.dtype == np.float64
    assert np.array_equal(raw.ravel() if raw.shape[1] == 1 else raw, expected_raw[0])
    engine = SklearnEngine(model, "classification")
    both = engine.answer_part(Z, with_proba=True)
    labels = engine.answer_part(Z)
    assert both.predictions.dtype == expected_raw[1].dtype
    assert np.array_equal(both.predictions, expected_raw[1])
    assert both.probabilities is not None
    assert np.array_equal(both.probabilities, expected_raw[2])
    assert np.array_equal(labels.predictions, expected_raw[1]) and labels.probabilities is None


@pytest.mark.parametrize("case", REGRESSORS)
def test_a_regressor_s_parts_are_the_library_s_bits(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    X, y = datasets.load_diabetes(return_X_y=True)
    model = GradientBoostingRegressor(random_state=0, **REGRESSORS[case]).fit(X, y)
    Z = rows_around(X)
    expected, expected_raw = model.predict(Z), own_raw(model, Z)
    refuse_predict_stages(monkeypatch)
    raw = boosted_raw(model, Z)
    assert raw is not None and np.array_equal(raw, expected_raw)
    values = SklearnEngine(model, "regression").answer_part(Z).predictions
    assert values.dtype == expected.dtype and np.array_equal(values, expected)


def test_a_request_in_two_parts_walks_outside_the_gil_with_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y = datasets.load_iris(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=30, random_state=0).fit(X, y)
    Z = rows_around(X)
    whole = SklearnEngine(model, "classification").answer(Z, with_proba=True)
    own = model.predict_proba(Z)
    refuse_predict_stages(monkeypatch)
    split = RowParts(threads=2, min_rows=100).answer(
        SklearnEngine(model, "classification"), Z, with_proba=True
    )
    assert np.array_equal(split.predictions, whole.predictions)
    assert split.probabilities is not None and whole.probabilities is not None
    assert np.array_equal(split.probabilities, whole.probabilities)
    assert np.array_equal(whole.probabilities, own)


def test_a_request_in_one_call_keeps_the_library_s_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled engines' fidelity check compares them with this very answer."""
    X, y = datasets.load_breast_cancer(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y)
    calls = count_predict_stages(monkeypatch)
    SklearnEngine(model, "classification").answer(X, with_proba=True)
    RowParts(threads=2, min_rows=10 * len(X)).answer(  # too small to split
        SklearnEngine(model, "classification"), X, with_proba=True
    )
    assert calls == [1, 1]


def test_missing_values_are_refused_as_the_library_refuses_them() -> None:
    X, y = datasets.load_breast_cancer(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y)
    Z = X.copy()
    Z[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN") as own:
        model.predict_proba(Z)
    with pytest.raises(ValueError, match="NaN") as ours:
        boosted_raw(model, Z)
    assert str(ours.value) == str(own.value)


def test_other_models_and_sparse_rows_are_left_to_the_library() -> None:
    from scipy import sparse

    X, y = datasets.load_breast_cancer(return_X_y=True)
    for other in (
        HistGradientBoostingClassifier(max_iter=5),
        RandomForestClassifier(n_estimators=3, random_state=0),
    ):
        assert boosted_raw(other.fit(X, y), X) is None
    model = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y)
    assert boosted_raw(model, sparse.csr_matrix(X)) is None


def test_a_refit_model_is_walked_anew() -> None:
    X, y = datasets.load_breast_cancer(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y)
    boosted_raw(model, X)
    model.set_params(n_estimators=8, learning_rate=0.5).fit(X, 1 - y)
    raw = boosted_raw(model, X)
    assert raw is not None and np.array_equal(raw, own_raw(model, X))


def test_while_another_request_s_parts_run_a_request_walks_in_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Walking outside the GIL costs CPU; it pays only while the pool's threads are idle."""
    from ensembles.inference import row_parts

    X, y = datasets.load_iris(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X, y)
    Z = rows_around(X)
    own = model.predict_proba(Z)
    calls = count_predict_stages(monkeypatch)
    parts = RowParts(threads=2, min_rows=100)
    engine = SklearnEngine(model, "classification")
    split = parts.answer(engine, Z, with_proba=True)
    assert calls == [] and row_parts._BUSY[0] == 0  # two parts, both walked apart, done
    monkeypatch.setattr(row_parts, "_BUSY", [1])  # another request's part is running
    whole = parts.answer(engine, Z, with_proba=True)
    assert calls == [1]
    for answer in (split, whole):
        assert answer.probabilities is not None and np.array_equal(answer.probabilities, own)


def test_an_init_of_one_value_for_all_rows_is_worked_out_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The default init (a dummy predicting the prior) gives every row the same raw
    prediction: it is made on one row once per fit and repeated, not validated and
    predicted for every row of every part again."""
    X, y = datasets.load_iris(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X, y)
    Z = rows_around(X)
    expected = own_raw(model, Z)
    init = model._raw_predict_init
    rows_asked: list[int] = []

    def counted(rows: Any) -> Any:
        rows_asked.append(len(rows))
        return init(rows)

    monkeypatch.setattr(model, "_raw_predict_init", counted)
    for lo, hi in ((0, len(Z)), (0, 7), (5, len(Z))):
        raw = boosted_raw(model, Z[lo:hi])
        assert raw is not None and np.array_equal(raw, expected[lo:hi])
    assert rows_asked == [1]
    model.set_params(learning_rate=0.3).fit(X, y[::-1])  # a refit: worked out anew
    expected = own_raw(model, Z)
    rows_asked.clear()
    raw = boosted_raw(model, Z)
    assert raw is not None and np.array_equal(raw, expected) and rows_asked == [1]


def test_an_init_that_differs_from_row_to_row_is_the_library_s() -> None:
    from sklearn.dummy import DummyClassifier

    X, y = datasets.load_breast_cancer(return_X_y=True)
    drawn = DummyClassifier(strategy="stratified", random_state=3)
    model = GradientBoostingClassifier(n_estimators=10, init=drawn, random_state=0).fit(X, y)
    Z = rows_around(X)
    raw = boosted_raw(model, Z)
    assert raw is not None and np.array_equal(raw.ravel(), model.decision_function(Z))
    # the init draws each row's class: one row repeated would not be these bits
    assert len(np.unique(model._raw_predict_init(Z.astype(np.float32)))) == 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_float_matrix_of_finite_rows_skips_the_library_s_check(
    dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part's rows as the service gives them (a float matrix of the fitted width, a
    model fitted without column names) are cast and checked finite, the library's check
    (~0.2 ms of Python a part) left out; the same float32 rows, the same bits."""
    from ensembles.inference import boosted_sum

    X, y = datasets.load_breast_cancer(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=20, random_state=0).fit(X, y)
    Z: np.ndarray[Any, Any] = rows_around(X).astype(dtype)
    expected = model.decision_function(Z)

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the library's check")

    monkeypatch.setattr(boosted_sum, "validate_data", refused)
    for rows, same in ((Z, expected), (np.asfortranarray(Z), expected), (Z[::2], expected[::2])):
        raw = boosted_raw(model, rows)
        assert raw is not None and np.array_equal(raw.ravel(), same)


def test_rows_the_shortcut_does_not_take_get_the_library_s_error_or_warning() -> None:
    import pandas as pd

    X, y = datasets.load_breast_cancer(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y)
    for bad in (np.where(np.arange(X.size).reshape(X.shape) == 40, np.inf, X), X[:, :29]):
        with pytest.raises(ValueError) as own:
            model.decision_function(bad)
        with pytest.raises(ValueError) as ours:
            boosted_raw(model, bad)
        assert str(ours.value) == str(own.value)
    huge = X * 1e300  # finite float64s, infinite once cast to float32: one warning
    with pytest.raises(ValueError) as own, pytest.warns(RuntimeWarning) as own_warnings:
        model.decision_function(huge)
    with pytest.raises(ValueError) as ours, pytest.warns(RuntimeWarning) as our_warnings:
        boosted_raw(model, huge)
    assert str(ours.value) == str(own.value)
    assert [str(w.message) for w in our_warnings] == [str(w.message) for w in own_warnings]
    named = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
    model.fit(named, y)
    with pytest.warns(UserWarning, match="feature names") as own_warnings:
        expected = model.decision_function(X)
    with pytest.warns(UserWarning, match="feature names") as our_warnings:
        raw = boosted_raw(model, X)
    assert [str(w.message) for w in our_warnings] == [str(w.message) for w in own_warnings]
    assert raw is not None and np.array_equal(raw.ravel(), expected)
