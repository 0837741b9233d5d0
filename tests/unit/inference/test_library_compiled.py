"""XGBoost and LightGBM through the compiled tree engine, exactly as the libraries answer.

Pipelines are fitted directly (no service): every objective family compiled, binary,
multiclass and regression.  The compiled answers are compared with the library's own
``predict_proba`` / ``predict`` on the training rows, on rows exactly on (and next to)
every split threshold, read here from the library's own tree dump (independently of the
engine's probes, which read treelite's), and on rows with missing values: labels
identical, numbers within 1e-9.  Models the engine cannot answer exactly (categorical
splits, objectives it does not know, a plan that misreads the library) are refused with
the reason, and the library answers them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import pickle
from dataclasses import replace
from functools import cache
from typing import Any

import catboost
import lightgbm
import numpy as np
import pandas as pd
import pytest
import treelite.gtil
import xgboost
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.ensemble import BaggingRegressor, StackingClassifier, VotingClassifier, VotingRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from ensembles.catalog import kind_of
from ensembles.inference import (
    ENGINE,
    CompiledComposite,
    CompiledModel,
    FidelityReport,
    compile_model,
    compiling,
    gtil_call,
    library_trees,
    rebuild,
)
from ensembles.inference.engines import SklearnEngine
from ensembles.inference.library_trees import expf
from ensembles.tasks import Task
from tests.unit.datasets import frame

TOL = 1e-9
RS = 3
Model = CompiledModel | CompiledComposite

CASES: dict[str, tuple[str, Task, type, dict[str, Any]]] = {
    "xgboost-multi_softprob-iris": ("iris", "classification", xgboost.XGBClassifier, {}),
    "xgboost-multi_softprob-wine": ("wine", "classification", xgboost.XGBClassifier, {}),
    "xgboost-binary_logistic": ("breast_cancer", "classification", xgboost.XGBClassifier, {}),
    "xgboost-binary_logistic-missing": (
        "breast_cancer_nan",
        "classification",
        xgboost.XGBClassifier,
        {},
    ),
    "xgboost-squarederror": ("diabetes", "regression", xgboost.XGBRegressor, {}),
    "xgboost-absoluteerror": (
        "diabetes",
        "regression",
        xgboost.XGBRegressor,
        {"objective": "reg:absoluteerror"},
    ),
    "xgboost-pseudohubererror": (
        "diabetes",
        "regression",
        xgboost.XGBRegressor,
        {"objective": "reg:pseudohubererror", "huber_slope": 100.0},  # smaller: no splits
    ),
    "xgboost-quantileerror": (
        "diabetes_nan",
        "regression",
        xgboost.XGBRegressor,
        {"objective": "reg:quantileerror", "quantile_alpha": 0.3},
    ),
    "lightgbm-multiclass-wine": ("wine", "classification", lightgbm.LGBMClassifier, {}),
    "lightgbm-multiclass-iris": ("iris", "classification", lightgbm.LGBMClassifier, {}),
    "lightgbm-binary": ("breast_cancer", "classification", lightgbm.LGBMClassifier, {}),
    "lightgbm-binary-missing": (
        "breast_cancer_nan",
        "classification",
        lightgbm.LGBMClassifier,
        {},
    ),
    "lightgbm-l2": ("diabetes", "regression", lightgbm.LGBMRegressor, {}),
    "lightgbm-l1": ("diabetes", "regression", lightgbm.LGBMRegressor, {"objective": "l1"}),
    "lightgbm-huber": (
        "diabetes_nan",
        "regression",
        lightgbm.LGBMRegressor,
        {"objective": "huber"},
    ),
    "lightgbm-quantile": (
        "diabetes",
        "regression",
        lightgbm.LGBMRegressor,
        {"objective": "quantile", "alpha": 0.3},
    ),
}


@cache
def table(name: str) -> tuple[pd.DataFrame, pd.Series]:
    """A bundled dataset; ``_nan``: 15% of its first two columns missing."""
    f = frame(name.removesuffix("_nan")).copy()
    X, y = f.drop(columns="target"), f["target"]
    if name.endswith("_nan"):
        rng = np.random.default_rng(RS)
        for column in X.columns[:2]:
            X[column] = X[column].where(rng.random(len(X)) > 0.15)
    return X, y


def library(cls: type, **params: Any) -> BaseEstimator:
    quiet = {"verbose": -1} if cls.__module__.startswith("lightgbm") else {}
    settings = {"n_estimators": 40, "random_state": RS, "n_jobs": 1, **quiet, **params}
    estimator: BaseEstimator = cls(**settings)
    return estimator


@cache
def fitted(case: str) -> Pipeline:
    name, _, cls, params = CASES[case]
    X, y = table(name)
    return Pipeline([("scale", StandardScaler()), ("model", library(cls, **params))]).fit(X, y)


def compiled_case(case: str) -> tuple[Model | None, FidelityReport]:
    name, task, _, _ = CASES[case]
    return compile_model(fitted(case), task, table(name)[0], calibrate=False)


# --- rows the library's own dumps place on its thresholds ---------------------------------


def _library_thresholds(estimator: BaseEstimator) -> list[tuple[int, float, bool]]:
    """(column, threshold, compared in float32) of every split, from the library's dump."""
    if hasattr(estimator, "get_booster"):
        df = estimator.get_booster().trees_to_dataframe()
        splits = df[df["Feature"] != "Leaf"]
        names = list(estimator.get_booster().feature_names or [])
        columns = [names.index(f) if f in names else int(f[1:]) for f in splits["Feature"]]
        return [(c, float(t), True) for c, t in zip(columns, splits["Split"], strict=True)]
    df = estimator.booster_.trees_to_dataframe()
    splits = df[df["split_feature"].notna()]
    names = list(estimator.booster_.feature_name())
    columns = [names.index(f) for f in splits["split_feature"]]
    return [(c, float(t), False) for c, t in zip(columns, splits["threshold"], strict=True)]


def _around(threshold: float, float32: bool) -> list[float]:
    if float32:
        t = np.float32(threshold)
        return [
            float(np.nextafter(t, np.float32(-np.inf))),
            float(t),
            float(np.nextafter(t, t + 1)),
        ]
    return [np.nextafter(threshold, -np.inf), threshold, np.nextafter(threshold, np.inf)]


def threshold_rows(estimator: BaseEstimator, Xt: NDArray[Any], n_base: int = 8) -> NDArray[Any]:
    rng = np.random.default_rng(RS)
    out = [Xt[:0]]
    for column, threshold, float32 in _library_thresholds(estimator):
        for value in _around(threshold, float32):
            rows = Xt[rng.integers(0, len(Xt), n_base)].copy()
            rows[:, column] = value
            out.append(rows)
    return np.vstack(out)


def missing_rows(Xt: NDArray[Any]) -> NDArray[Any]:
    parts = []
    for j in range(Xt.shape[1]):
        rows = Xt[:10].copy()
        rows[:, j] = np.nan
        parts.append(rows)
    return np.vstack(parts)


def check_rows(pipeline: Pipeline, X: pd.DataFrame) -> NDArray[Any]:
    Xt = np.asarray(pipeline[:-1].transform(X), dtype=np.float64)
    return np.vstack([Xt, threshold_rows(pipeline[-1], Xt), missing_rows(Xt)])


def assert_answers_as_library(engine: Model, rows: NDArray[Any], task: Task) -> None:
    estimator = engine.estimator
    if task == "regression":
        expected = np.asarray(estimator.predict(rows), dtype=np.float64)
        np.testing.assert_allclose(engine.predict(rows), expected, rtol=0, atol=TOL)
        return
    labels, proba = engine.predict_with_proba(rows)
    np.testing.assert_array_equal(labels, estimator.predict(rows))
    assert proba is not None
    expected_proba = np.asarray(estimator.predict_proba(rows), dtype=np.float64)
    np.testing.assert_allclose(proba, expected_proba, rtol=0, atol=TOL)


# --- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_library_models_compile_and_answer_as_the_library(case: str) -> None:
    engine, report = compiled_case(case)
    assert report.ok, report.reason
    assert engine is not None and report.engine == ENGINE
    assert report.max_abs_diff <= TOL
    name, task, _, _ = CASES[case]
    assert_answers_as_library(engine, check_rows(fitted(case), table(name)[0]), task)


def test_the_kind_says_how_the_engine_takes_each_library() -> None:
    for case, expected in (("xgboost-binary_logistic", "xgboost"), ("lightgbm-l2", "lightgbm")):
        kind = kind_of(fitted(case)[-1])
        assert kind is not None
        assert kind.compiled_for(CASES[case][1]) == expected


@pytest.mark.parametrize(
    ("cls", "params"),
    [
        (xgboost.XGBClassifier, {"early_stopping_rounds": 3}),
        (lightgbm.LGBMClassifier, {}),
    ],
    ids=["xgboost", "lightgbm"],
)
def test_early_stopped_models_answer_with_their_best_iteration(
    cls: type, params: dict[str, Any]
) -> None:
    X, y = table("breast_cancer")
    Xa, ya, Xv, yv = X.iloc[::2], y.iloc[::2], X.iloc[1::2], y.iloc[1::2]
    estimator = library(cls, **{**params, "n_estimators": 300, "learning_rate": 0.5})
    if cls is lightgbm.LGBMClassifier:
        estimator.fit(Xa, ya, eval_set=[(Xv, yv)], callbacks=[lightgbm.early_stopping(3, False)])
        stopped = estimator.best_iteration_
    else:
        estimator.fit(Xa, ya, eval_set=[(Xv, yv)], verbose=False)
        stopped = estimator.best_iteration + 1
    assert stopped < 300  # it stopped early: trees beyond the best iteration exist or not
    pipeline = Pipeline([("identity", FunctionTransformer()), ("model", estimator)])
    engine, report = compile_model(pipeline, "classification", Xa, calibrate=False)
    assert report.ok, report.reason
    assert engine is not None
    assert_answers_as_library(engine, check_rows(pipeline, X), "classification")


def test_lightgbm_tiny_values_are_zero_as_lightgbm_reads_them() -> None:
    """LightGBM reads |x| <= 1e-35 as 0: a plan comparing them as they are is refused."""
    X, y = table("breast_cancer")
    X = X.iloc[:, :4].copy()
    rng = np.random.default_rng(RS)
    # -1, 0, 1: LightGBM splits next to zero at +-1e-35 (its kZeroThreshold)
    signal = np.where(rng.random(len(X)) < 0.8, np.where(y == 1, 0.0, -1.0), 0.0)
    X["signal"] = signal + np.where(rng.random(len(X)) < 0.3, 1.0, 0.0)
    model = library(lightgbm.LGBMClassifier)
    pipeline = Pipeline([("identity", FunctionTransformer()), ("model", model)]).fit(X, y)
    engine, report = compile_model(pipeline, "classification", X, calibrate=False)
    assert report.ok and isinstance(engine, CompiledModel), report.reason
    tiny = np.repeat(np.array(X.iloc[:50], dtype=np.float64), 4, axis=0)
    tiny[:, -1] = np.resize([1e-35, -1e-35, float(np.float32(-1e-35)), -1e-36], len(tiny))
    assert_answers_as_library(engine, tiny, "classification")
    literal = replace(engine, plan=replace(engine.plan, tiny_as_zero=False))
    reason, _ = compiling._check(literal, tiny)
    assert reason is not None  # the gate catches an engine that misreads them


def _categorical_table() -> tuple[pd.DataFrame, pd.Series]:
    """Four numeric columns and ``code``, categories 0-5 of which 1 and 4 flip the label."""
    X, y = table("breast_cancer")
    X = X.iloc[:, :4].copy()
    codes = np.random.default_rng(RS).integers(0, 6, len(X))
    X["code"] = codes.astype(np.float64)
    y = pd.Series(np.where(np.isin(codes, [1, 4]), 1 - y, y), index=X.index)
    return X, y


def _code_rows(X: pd.DataFrame) -> NDArray[Any]:
    """Rows whose code is every known category, unseen, negative, fractional or missing."""
    codes = [0, 1, 2, 3, 4, 5, 6, 100, -1, -0.5, -1e-36, 2.7, np.nan, 1e10, 2.0**31 + 1]
    base = np.array(X.iloc[:20], dtype=np.float64)
    parts = []
    for code in codes:
        rows = base.copy()
        rows[:, -1] = code
        parts.append(rows)
    return np.vstack(parts)


def test_lightgbm_categorical_splits_are_compiled_as_lightgbm_routes_codes() -> None:
    """Treelite routes LightGBM's category lists as LightGBM does, but for codes in
    (-1, 0), which LightGBM truncates to category 0: an engine that does not is refused."""
    X, y = _categorical_table()
    model = library(lightgbm.LGBMClassifier, min_data_per_group=5, cat_smooth=1.0)
    pipeline = Pipeline([("identity", FunctionTransformer()), ("model", model)])
    pipeline.fit(X, y, model__categorical_feature=[4])
    engine, report = compile_model(pipeline, "classification", X, calibrate=False)
    assert report.ok, report.reason
    assert isinstance(engine, CompiledModel) and engine.plan.truncated == (4,)
    rows = _code_rows(X)
    assert_answers_as_library(engine, rows, "classification")
    literal = replace(engine, plan=replace(engine.plan, truncated=()))
    reason, _ = compiling._check(literal, rows)
    assert reason is not None  # the gate catches an engine that reads -0.5 as negative
    X_probe = np.array(X, dtype=np.float64)
    assert compiling._check(literal, X_probe)[0] is None  # (only such codes differ)


def test_xgboost_categorical_models_are_refused_and_xgboost_answers() -> None:
    X, y = _categorical_table()
    X = X.assign(code=pd.Categorical(X["code"].astype(int)))
    model = library(xgboost.XGBClassifier, enable_categorical=True, tree_method="hist")
    pipeline = Pipeline([("identity", FunctionTransformer()), ("model", model)]).fit(X, y)
    engine, report = compile_model(pipeline, "classification", X, calibrate=False)
    assert engine is None and not report.ok
    assert report.reason is not None and "treelite cannot import XGBClassifier" in report.reason
    answer = SklearnEngine(model, "classification").answer(X.iloc[:40], with_proba=True)
    np.testing.assert_array_equal(answer.predictions, model.predict(X.iloc[:40]))
    assert answer.probabilities is not None
    np.testing.assert_array_equal(answer.probabilities, model.predict_proba(X.iloc[:40]))


@pytest.mark.parametrize(
    ("cls", "params", "reason"),
    [
        (xgboost.XGBClassifier, {"objective": "binary:logitraw"}, "'binary:logitraw'"),
        (xgboost.XGBRegressor, {"objective": "count:poisson"}, "'count:poisson'"),
        (lightgbm.LGBMRegressor, {"reg_sqrt": True}, "output transform"),
    ],
    ids=["xgboost-logitraw", "xgboost-poisson", "lightgbm-reg_sqrt"],
)
def test_objectives_the_engine_does_not_know_are_refused(
    cls: type, params: dict[str, Any], reason: str
) -> None:
    X, y = table("breast_cancer")
    task: Task = "classification" if cls is xgboost.XGBClassifier else "regression"
    pipeline = Pipeline([("identity", FunctionTransformer()), ("model", library(cls, **params))])
    pipeline.fit(X, y)
    engine, report = compile_model(pipeline, task, X, calibrate=False)
    assert engine is None and report.reason is not None and reason in report.reason


def test_catboost_is_answered_by_its_own_predictor() -> None:
    X, y = table("iris")
    model = catboost.CatBoostClassifier(
        iterations=20, random_seed=RS, verbose=False, thread_count=1, allow_writing_files=False
    )
    pipeline = Pipeline([("identity", FunctionTransformer()), ("model", model)]).fit(X, y)
    engine, report = compile_model(pipeline, "classification", X, calibrate=False)
    assert engine is None and not report.ok
    assert report.reason is not None and "not a tree ensemble the compiled engine supports" in (
        report.reason
    )
    answer = SklearnEngine(model, "classification").answer(np.asarray(X), with_proba=True)
    # CatBoost's multiclass predict is a column; the service answers its labels flat.
    np.testing.assert_array_equal(answer.predictions, model.predict(np.asarray(X)).ravel())


@pytest.mark.parametrize(
    "case", ["xgboost-binary_logistic", "xgboost-multi_softprob-wine", "lightgbm-huber"]
)
def test_a_stored_library_model_is_rebuilt_and_answers_the_same(case: str) -> None:
    engine, report = compiled_case(case)
    assert engine is not None
    stored = pickle.loads(pickle.dumps(fitted(case)))  # as the registry stores the artifact
    name, task, _, _ = CASES[case]
    again, rebuilt = rebuild(stored, task, report.as_dict())
    assert rebuilt.ok, rebuilt.reason
    assert again is not None
    rows = check_rows(stored, table(name)[0])
    assert_answers_as_library(again, rows, task)
    assert_answers_as_library(pickle.loads(pickle.dumps(engine)), rows, task)


def _composites(task: Task) -> dict[str, BaseEstimator]:
    if task == "classification":
        members = [
            ("xgb", library(xgboost.XGBClassifier)),
            ("lgbm", library(lightgbm.LGBMClassifier)),
            ("lin", LogisticRegression(max_iter=2000)),
        ]
        return {
            "voting": VotingClassifier(members, voting="soft"),
            "stacking": StackingClassifier(
                members[:2], final_estimator=LogisticRegression(max_iter=2000), cv=3
            ),
        }
    return {
        "voting": VotingRegressor([("xgb", library(xgboost.XGBRegressor)), ("ridge", Ridge())]),
        "bagging": BaggingRegressor(
            library(lightgbm.LGBMRegressor), n_estimators=3, max_features=0.7, random_state=RS
        ),
    }


@pytest.mark.parametrize(
    ("name", "task", "composite"),
    [
        ("wine", "classification", "voting"),
        ("breast_cancer", "classification", "stacking"),
        ("diabetes", "regression", "voting"),
        ("diabetes", "regression", "bagging"),
    ],
)
def test_library_members_of_composites_are_compiled(name: str, task: Task, composite: str) -> None:
    X, y = table(name)
    estimator = _composites(task)[composite]
    pipeline = Pipeline([("scale", StandardScaler()), ("model", estimator)]).fit(X, y)
    engine, report = compile_model(pipeline, task, X, calibrate=False)
    assert report.ok, report.reason
    assert isinstance(engine, CompiledComposite)
    libraries = [m for m in report.members if m["kind"].startswith(("XGB", "LGBM"))]
    assert libraries and all(m["engine"] == ENGINE for m in libraries), report.members
    Xt = np.asarray(pipeline[:-1].transform(X), dtype=np.float64)
    assert_answers_as_library(engine, np.vstack([Xt, Xt[::-1] * 0.999]), task)


def test_expf_is_the_c_librarys() -> None:
    """Numpy's float32 exp is not glibc's; XGBoost's links use glibc's."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.expf.restype, libm.expf.argtypes = ctypes.c_float, [ctypes.c_float]
    x = np.random.default_rng(RS).uniform(-30, 30, 100_000).astype(np.float32)
    expected = np.array([libm.expf(float(v)) for v in x], dtype=np.float32)
    np.testing.assert_array_equal(expf(x), expected)


@pytest.mark.parametrize(
    "case", ["xgboost-binary_logistic", "xgboost-multi_softprob-iris", "xgboost-squarederror"]
)
def test_xgboost_trees_are_scored_by_gtils_c_function_as_by_treelites_call(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XGBoost's per-tree scores come from GTIL's C function called directly, as the
    forests' scores do (treelite's ``_predict_impl`` is not called: issue 22's one-row
    latency), and answer to the bit as treelite's own call (taken when the direct call is
    unavailable) for 1, 2 and all rows."""
    engine, report = compiled_case(case)
    assert engine is not None and report.ok, report.reason
    name, task, _, _ = CASES[case]
    rows = check_rows(fitted(case), table(name)[0])

    def answers(X: NDArray[Any]) -> tuple[NDArray[Any], ...]:
        if task == "regression":
            return (engine.predict(X),)
        labels, proba = engine.predict_with_proba(X)
        assert proba is not None
        return labels, proba

    real = treelite.gtil.gtil._predict_impl
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(treelite.gtil.gtil, "_predict_impl", counted)
    direct = {n: answers(rows[:n]) for n in (1, 2, len(rows))}
    assert calls == []  # the direct way
    monkeypatch.setattr(gtil_call, "_C", None)  # treelite's own call
    for n, ours in direct.items():
        theirs = answers(rows[:n])
        for a, b in zip(ours, theirs, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    assert calls


@pytest.mark.parametrize(
    ("case", "in_order"),
    [
        ("xgboost-binary_logistic", True),
        ("xgboost-squarederror", True),
        ("xgboost-multi_softprob-iris", False),  # trees alternate between the classes
    ],
)
def test_xgboost_s_few_rows_ask_the_booster_nothing_and_sum_trees_as_given(
    case: str, in_order: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22's one-row cost: XGBoost's ``n_features_in_`` asks the booster through
    ctypes on every read, so the engine reads it once; with one output column the trees'
    scores are summed in the order GTIL gives them, without gathering them first.  The
    answers are the library's to the bit (every XGBoost case above, and here against
    the gathered sum)."""
    engine, report = compiled_case(case)
    assert isinstance(engine, CompiledModel) and report.ok, report.reason
    sum32 = engine.plan.sum32
    assert sum32 is not None and sum32.in_order is in_order
    name, task, _, _ = CASES[case]
    rows = check_rows(fitted(case), table(name)[0])
    engine.predict(rows[:1])  # the count is read at the engine's first answer
    reads: list[int] = []
    real = type(engine.estimator).n_features_in_

    def counted(self: Any) -> int:
        reads.append(1)
        return int(real.fget(self))

    monkeypatch.setattr(type(engine.estimator), "n_features_in_", property(counted))
    ours = [engine.predict(rows[:n]) for n in (1, 2, len(rows))]
    assert reads == []
    gathered = replace(sum32, in_order=False)
    X = engine._input(rows)
    assert X is not None
    np.testing.assert_array_equal(
        library_trees.margins32(engine.model, X, sum32),
        library_trees.margins32(engine.model, X, gathered),
    )
    if task == "classification":
        np.testing.assert_array_equal(ours[-1], engine.estimator.predict(rows))


def test_xgboost_s_link_of_one_row_is_the_rows_link_without_arrays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 22: ``binary:logistic``'s link of a one-row answer is worked out in float32
    scalars (the vectorised way made eight small arrays, 10 us of a one-row answer
    against the forest's 1): the same bits as the rows' way for margins of every size
    (rounding midpoints of ``expf``, overflow, NaN), and the array ``expf`` is not
    called for it."""
    rng = np.random.default_rng(RS)
    margins = np.concatenate(
        [
            rng.normal(0.0, 5.0, 3000),
            rng.normal(0.0, 60.0, 300).astype(np.float32),
            [0.0, -0.0, 1e-45, 88.7, -88.7, 89.0, -104.0, 200.0, -200.0, np.inf, -np.inf],
            [np.nan],
        ]
    ).astype(np.float64)
    with np.errstate(over="ignore"):  # the float32 cast of exp(200) overflows, as it should
        rows = library_trees.expit32(margins[:, None].copy())  # more than one row: arrays
    monkeypatch.setattr(library_trees, "expf", None)  # the scalar way must not need it
    for i, margin in enumerate(margins.tolist()):
        one = library_trees.expit32(np.array([[margin]]))
        assert one.dtype == np.float64 and one.shape == (1, 2)
        assert one.tobytes() == rows[i : i + 1].tobytes(), margin
