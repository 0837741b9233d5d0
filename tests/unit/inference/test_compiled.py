"""The compiled inference path: exactly scikit-learn's answers, or refused with a reason.

Every tree kind, both tasks, several datasets: labels identical and probabilities or
values within 1e-9 of scikit-learn, on the training rows, on rows that sit exactly on the
fitted trees' split thresholds (built here from ``tree_`` / the histogram predictors,
independently of the module's own probes) and on rows whose class scores tie.  A model
that fails the fidelity check is served by scikit-learn with the reason reported.
"""

from __future__ import annotations

import ctypes
import json
import pickle
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest
import treelite
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.pipeline import Pipeline

from ensembles.data import TrainingData, select_training_data, table_from_frame
from ensembles.inference import (
    ENGINE,
    SKLEARN,
    CompiledModel,
    FidelityReport,
    Servable,
    compile_model,
    compiling,
    gtil,
    gtil_call,
    prepare,
    rebuild,
)
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import frame

RS = 7
NO_EVAL = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
TOL = 1e-9
TREE_KINDS: dict[str, dict[str, Any]] = {
    "random_forest": {"n_estimators": 12},
    "extra_trees": {"n_estimators": 12},
    "gradient_boosting": {"n_estimators": 12},
    "hist_gradient_boosting": {"max_iter": 12},
}
DATASETS = {
    "iris": "classification",
    "breast_cancer": "classification",
    "wine": "classification",
    "digits300": "classification",
    "mixed_wine": "classification",  # strings, booleans, missing values: every preprocessing
    "diabetes": "regression",
    "iris_petal_width": "regression",
    "mixed_diabetes": "regression",
}
CASES = [pytest.param(kind, name, id=f"{kind}-{name}") for name in DATASETS for kind in TREE_KINDS]


def _mixed(base: str) -> pd.DataFrame:
    rng = np.random.default_rng(RS)
    f = frame(base).copy()
    first = next(c for c in f.columns if c != "target")
    f[first] = f[first].where(rng.random(len(f)) > 0.15)  # imputed (or NaN for HGB)
    f["colour"] = pd.Series(rng.choice(["red", "green", "blue", None], len(f)), dtype=object)
    f["flag"] = rng.choice([True, False], len(f))
    f["count"] = rng.integers(0, 5, len(f))
    return f


@cache
def dataset(name: str) -> TrainingData:
    if name == "digits300":
        table, target = frame("digits").iloc[:300], "target"
    elif name == "iris_petal_width":
        table, target = frame("iris").drop(columns="target"), "petal width (cm)"
    elif name.startswith("mixed_"):
        table, target = _mixed(name.removeprefix("mixed_")), "target"
    else:
        table, target = frame(name), "target"
    data = select_training_data(table_from_frame(table.reset_index(drop=True)), target)
    assert data.task == DATASETS[name]
    return data


@cache
def fitted(kind: str, name: str) -> FittedModel:
    data = dataset(name)
    raw = {"kind": kind, "params": TREE_KINDS[kind]}
    return train(data, resolve_ensemble(parse_estimator_spec(raw), data.task), NO_EVAL, RS)


@cache
def compiled(kind: str, name: str) -> tuple[CompiledModel | None, FidelityReport]:
    model = fitted(kind, name)
    return compile_model(model.pipeline, model.signature.task, dataset(name).X, calibrate=False)


def served(model: FittedModel, engine: CompiledModel | None) -> Servable:
    """The version's servable with ``engine`` as its compiled engine (None: without one)."""
    servable = prepare(model.pipeline, model.signature, None)
    return servable if engine is None else replace(servable, engines=(engine, *servable.engines))


def preprocessed(pipeline: Pipeline, X: pd.DataFrame) -> NDArray[Any]:
    return np.asarray(pipeline[:-1].transform(X))


def _ok(kind: str, name: str) -> CompiledModel:
    engine, report = compiled(kind, name)
    assert report.ok, report.reason
    assert engine is not None
    return engine


def threshold_rows(estimator: BaseEstimator, Xt: NDArray[Any], n_base: int = 3) -> NDArray[Any]:
    """Rows that reach split nodes with the split column exactly on the node's threshold.

    Also the nearest values either side as the trees compare them: float32 for
    scikit-learn's trees (they cast X), float64 for histogram gradient boosting.
    """
    rng = np.random.default_rng(RS)
    rows: list[NDArray[Any]] = []

    def put(base: NDArray[Any], column: int, values: list[float]) -> None:
        for value in values:
            row = base.copy()
            row[column] = value
            rows.append(row)

    predictors = getattr(estimator, "_predictors", None)
    if predictors is not None:  # histogram gradient boosting keeps no tree_
        # With categorical columns its nodes index its own order: categorical ones first.
        is_cat = estimator.is_categorical_
        order = np.arange(Xt.shape[1])
        if is_cat is not None:
            order = np.concatenate([np.flatnonzero(is_cat), np.flatnonzero(~is_cat)])
        for predictor in (p for stage in predictors for p in stage):
            nodes = predictor.nodes
            for b in rng.integers(0, len(Xt), n_base):
                i = 0
                while not nodes["is_leaf"][i] and not nodes["is_categorical"][i]:
                    f, t = int(order[nodes["feature_idx"][i]]), float(nodes["num_threshold"][i])
                    put(Xt[b], f, [t, np.nextafter(t, -np.inf), np.nextafter(t, np.inf)])
                    v = Xt[b, f]
                    left = nodes["missing_go_to_left"][i] if np.isnan(v) else v <= t
                    i = int(nodes["left"][i] if left else nodes["right"][i])
        return np.array(rows)
    for tree in np.asarray(estimator.estimators_, dtype=object).ravel():
        bases = rng.integers(0, len(Xt), n_base)
        path = tree.decision_path(Xt[bases])  # public: the nodes each row goes through
        for k, b in enumerate(bases):
            for node in path.indices[path.indptr[k] : path.indptr[k + 1]]:
                f = int(tree.tree_.feature[node])
                if f < 0:  # a leaf
                    continue
                t = float(tree.tree_.threshold[node])
                t32 = np.float32(t)
                near = [np.nextafter(t32, np.float32(-np.inf)), t32, np.nextafter(t32, np.inf)]
                put(Xt[b], f, [t, *(float(v) for v in near)])
    return np.array(rows)


def assert_same(engine: CompiledModel, estimator: BaseEstimator, X: NDArray[Any]) -> None:
    if engine.task == "classification":
        labels, proba = engine.predict_with_proba(X)
        np.testing.assert_array_equal(labels, estimator.predict(X))
        np.testing.assert_allclose(proba, estimator.predict_proba(X), rtol=0, atol=TOL)
    else:
        np.testing.assert_allclose(engine.predict(X), estimator.predict(X), rtol=0, atol=TOL)


# --- every tree kind, both tasks -------------------------------------------------------


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_compiled_answers_equal_the_pipeline_on_the_training_rows(kind: str, name: str) -> None:
    model, engine = fitted(kind, name), _ok(kind, name)
    _, report = compiled(kind, name)
    X = dataset(name).X
    assert report.engine == ENGINE and report.reason is None
    assert report.max_abs_diff <= TOL and report.n_rows_checked > len(X)
    servable = served(model, replace(engine, max_rows=len(X)))  # compiled for the whole frame
    np.testing.assert_array_equal(servable.transform(X), model.pipeline[:-1].transform(X))
    classifier = model.signature.task == "classification"
    answer = servable.answer(X, with_proba=classifier)
    assert answer.engine == ENGINE
    if classifier:
        np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(X))
        assert answer.probabilities is not None
        expected = model.pipeline.predict_proba(X)
        np.testing.assert_allclose(answer.probabilities, expected, rtol=0, atol=TOL)
    else:
        expected = model.pipeline.predict(X)
        np.testing.assert_allclose(answer.predictions, expected, rtol=0, atol=TOL)


@pytest.mark.parametrize(("kind", "name"), CASES)
def test_compiled_answers_equal_sklearn_on_split_thresholds(kind: str, name: str) -> None:
    model, engine = fitted(kind, name), _ok(kind, name)
    estimator = model.pipeline[-1]
    Xt = np.asarray(model.pipeline[:-1].transform(dataset(name).X), dtype=np.float64)
    rows = threshold_rows(estimator, Xt)
    assert len(rows) > 100
    assert_same(engine, estimator, rows)


# --- ties -----------------------------------------------------------------------------


def _passthrough_pipeline(estimator: BaseEstimator, X: pd.DataFrame, y: Any) -> Pipeline:
    pre = ColumnTransformer([("numeric", "passthrough", list(X.columns))])
    return Pipeline([("preprocess", pre), ("ensemble", estimator)]).fit(X, y)


@pytest.fixture(params=[0.0, 1e-12, -1e-12], ids=["exact", "last-bits-up", "last-bits-down"])
def nudged(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> float:
    """The engine's sums may differ from scikit-learn's in the last bits (another order of
    additions): nudge the last class's score by far less than the tolerance, which would
    flip every tie if ties were decided on the engine's own scores."""
    nudge = float(request.param)
    original = CompiledModel._scores

    def scores(self: CompiledModel, X: NDArray[np.float64]) -> NDArray[np.float64]:
        out = original(self, X)
        out[:, -1] += nudge
        return out

    monkeypatch.setattr(CompiledModel, "_scores", scores)
    return nudge


def _tied(scores: NDArray[Any]) -> NDArray[np.bool_]:
    top = np.sort(scores, axis=1)
    return np.asarray(top[:, -1] == top[:, -2])


@pytest.mark.parametrize("name", ["breast_cancer", "iris"], ids=["binary", "multiclass"])
def test_a_forest_of_two_disagreeing_trees_gives_sklearns_label_on_ties(
    name: str, nudged: float
) -> None:
    data = dataset(name)
    raw = {"kind": "random_forest", "params": {"n_estimators": 2, "max_features": 1}}
    model = train(data, resolve_ensemble(parse_estimator_spec(raw), data.task), NO_EVAL, RS)
    engine, report = compile_model(model.pipeline, "classification", data.X, calibrate=False)
    assert engine is not None, report.reason
    # Pure leaves: each tree says 0 or 1, so the two disagree with 0.5 / 0.5 (a tie).
    rng = np.random.default_rng(RS)
    X = data.X.apply(lambda column: column.to_numpy()[rng.integers(0, len(column), 500)])
    tied = _tied(model.pipeline.predict_proba(X))
    assert tied.sum() >= 20
    labels, proba = engine.predict_with_proba(preprocessed(model.pipeline, X))
    expected = model.pipeline.predict(X)
    np.testing.assert_array_equal(labels, expected)
    np.testing.assert_allclose(proba, model.pipeline.predict_proba(X), rtol=0, atol=TOL)
    first = np.argmax(model.pipeline.predict_proba(X)[tied], axis=1)
    np.testing.assert_array_equal(labels[tied], model.pipeline.classes_[first])


def _balanced_binary() -> tuple[pd.DataFrame, NDArray[Any]]:
    f = frame("breast_cancer")
    keep = np.concatenate([np.flatnonzero(f["target"] == c)[:100] for c in (0, 1)])
    return f.drop(columns="target").iloc[keep], f["target"].to_numpy()[keep]


@pytest.mark.parametrize(
    ("estimator", "label_on_tie"),
    [
        # No learning: raw = the prior's log-odds = 0 exactly.  Gradient boosting says
        # raw >= 0 -> class 1; histogram boosting says raw > 0 (its raw is +-1e-300 here).
        (GradientBoostingClassifier(n_estimators=3, learning_rate=0.0, random_state=RS), 1),
        (HistGradientBoostingClassifier(max_iter=3, learning_rate=1e-300, random_state=RS), None),
    ],
    ids=["gradient_boosting", "hist_gradient_boosting"],
)
def test_boosting_raw_scores_at_zero_give_sklearns_label(
    estimator: BaseEstimator, label_on_tie: int | None, nudged: float
) -> None:
    X, y = _balanced_binary()
    pipeline = _passthrough_pipeline(estimator, X, y)
    engine, report = compile_model(pipeline, "classification", X, calibrate=False)
    assert engine is not None, report.reason
    labels, proba = engine.predict_with_proba(preprocessed(pipeline, X))
    np.testing.assert_array_equal(labels, pipeline.predict(X))
    np.testing.assert_allclose(proba, pipeline.predict_proba(X), rtol=0, atol=TOL)
    np.testing.assert_allclose(proba, 0.5, rtol=0, atol=TOL)  # every row is a tie
    if label_on_tie is not None:
        assert set(labels.tolist()) == {label_on_tie}


def test_multiclass_boosting_ties_give_the_first_class(nudged: float) -> None:
    data = dataset("iris")
    counts = np.bincount(np.searchsorted(np.unique(data.y), data.y))
    assert len(set(counts.tolist())) == 1  # balanced: the priors' raw scores are equal
    estimator = GradientBoostingClassifier(n_estimators=2, learning_rate=0.0, random_state=RS)
    pipeline = _passthrough_pipeline(estimator, data.X, data.y)
    engine, report = compile_model(pipeline, "classification", data.X, calibrate=False)
    assert engine is not None, report.reason
    labels = engine.predict(preprocessed(pipeline, data.X))
    np.testing.assert_array_equal(labels, pipeline.predict(data.X))
    assert set(labels.tolist()) == {pipeline.classes_[0]}


# --- refused: served by scikit-learn, with the reason -------------------------------------


def _perturbed(delta: float) -> Any:
    original = CompiledModel._scores

    def scores(self: CompiledModel, X: NDArray[np.float64]) -> NDArray[np.float64]:
        return original(self, X) + delta

    return scores


@pytest.mark.parametrize(
    ("kind", "name", "delta", "reason"),
    [
        ("random_forest", "breast_cancer", 1e-7, "probabilities differ by up to 1e-07"),
        ("gradient_boosting", "diabetes", 2e-9, "predicted values differ by up to 2e-09"),
        ("gradient_boosting", "breast_cancer", 50.0, "labels differ on"),
    ],
    ids=["probabilities-off", "values-off", "labels-off"],
)
def test_a_model_failing_the_fidelity_check_is_served_by_sklearn_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, kind: str, name: str, delta: float, reason: str
) -> None:
    model, X = fitted(kind, name), dataset(name).X
    monkeypatch.setattr(CompiledModel, "_scores", _perturbed(delta))
    engine, report = compile_model(model.pipeline, model.signature.task, X, calibrate=False)
    assert engine is None
    assert not report.ok and report.engine is None
    assert report.reason is not None and reason in report.reason
    assert report.n_rows_checked > len(X)
    stored = json.loads(json.dumps(report.as_dict()))  # what version metadata keeps
    assert stored["ok"] is False and reason in stored["reason"]
    answer = served(model, engine).answer(X, with_proba=model.signature.task != "regression")
    assert answer.engine == SKLEARN
    np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(X))
    rebuilt, again = rebuild(model.pipeline, model.signature.task, stored)
    assert rebuilt is None and again.reason == report.reason


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (
            {"kind": "bagging", "params": {"n_estimators": 4}, "estimator": {"kind": "knn"}},
            "BaggingClassifier is not a tree",
        ),
        ({"kind": "adaboost", "params": {"n_estimators": 4}}, "AdaBoostClassifier is not a tree"),
    ],
    ids=["bagging", "adaboost"],
)
def test_kinds_that_are_not_compiled_say_why(raw: dict[str, Any], reason: str) -> None:
    data = dataset("wine")
    model = train(data, resolve_ensemble(parse_estimator_spec(raw), data.task), NO_EVAL, RS)
    engine, report = compile_model(model.pipeline, "classification", data.X)
    assert engine is None and not report.ok
    assert report.reason is not None and reason in report.reason
    answer = prepare(model.pipeline, model.signature, None).answer(data.X)
    assert answer.engine == SKLEARN
    np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(data.X))


def test_a_model_the_engine_cannot_import_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(_model: object) -> None:
        raise treelite.TreeliteError("Not supported model type")

    monkeypatch.setattr(gtil.treelite.sklearn, "import_model", refuse)
    model = fitted("hist_gradient_boosting", "wine")
    engine, report = compile_model(model.pipeline, "classification", dataset("wine").X)
    assert engine is None
    assert report.reason == (
        "treelite cannot import HistGradientBoostingClassifier: Not supported model type"
    )


# --- serving and storing ---------------------------------------------------------------


def test_the_engine_is_chosen_by_request_size() -> None:
    model, engine = fitted("random_forest", "breast_cancer"), _ok("random_forest", "breast_cancer")
    X = dataset("breast_cancer").X
    assert engine.max_rows == compiling.DEFAULT_MAX_ROWS  # not calibrated here
    small, large = X.iloc[: engine.max_rows], X
    servable = served(model, engine)
    assert servable.answer(small).engine == ENGINE
    answer = servable.answer(large, with_proba=True)
    assert answer.engine == SKLEARN
    np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(large))
    assert answer.probabilities is not None
    np.testing.assert_array_equal(answer.probabilities, model.pipeline.predict_proba(large))


def test_calibration_records_a_crossover() -> None:
    model = fitted("gradient_boosting", "wine")
    engine, report = compile_model(model.pipeline, "classification", dataset("wine").X)
    assert engine is not None and report.ok
    assert engine.max_rows == report.crossover_rows >= 0
    assert report.compile_seconds > 0 and report.check_seconds > 0


def test_rebuilt_and_unpickled_engines_answer_the_same() -> None:
    model, engine = fitted("extra_trees", "wine"), _ok("extra_trees", "wine")
    _, report = compiled("extra_trees", "wine")
    stored = json.loads(json.dumps(report.as_dict()))
    rebuilt, checked = rebuild(model.pipeline, "classification", stored)
    assert rebuilt is not None and checked.ok, checked.reason
    assert checked.n_rows_checked > 0 and checked.crossover_rows == report.crossover_rows
    unpickled = pickle.loads(pickle.dumps(engine))
    Xt = preprocessed(model.pipeline, dataset("wine").X)
    assert prepare(model.pipeline, model.signature, stored).passthrough is not None
    for other in (rebuilt, unpickled):
        assert other.max_rows == engine.max_rows
        np.testing.assert_array_equal(
            other.answer(Xt, with_proba=True).probabilities,
            engine.answer(Xt, with_proba=True).probabilities,
        )
        np.testing.assert_array_equal(other.predict(Xt), engine.predict(Xt))


def test_column_arrays_need_no_data_frame() -> None:
    model, engine = fitted("random_forest", "iris"), _ok("random_forest", "iris")
    X = dataset("iris").X
    servable = served(model, engine)
    assert servable.passthrough is not None  # all numeric, nothing missing: columns stacked
    arrays = {c: X[c].to_numpy() for c in reversed(X.columns)}
    np.testing.assert_array_equal(servable.transform(arrays), model.pipeline[:-1].transform(X))
    answer = servable.answer(arrays)
    np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(X))
    mixed = served(fitted("random_forest", "mixed_wine"), _ok("random_forest", "mixed_wine"))
    assert mixed.passthrough is None  # one-hot and imputation: scikit-learn preprocesses


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_rows_scikit_learn_refuses_are_refused_the_same_way() -> None:
    model, engine = fitted("random_forest", "breast_cancer"), _ok("random_forest", "breast_cancer")
    Xt = preprocessed(model.pipeline, dataset("breast_cancer").X.iloc[:3]).copy()
    Xt[1, 0] = 1e300  # beyond float32: scikit-learn refuses it
    with pytest.raises(ValueError, match="too large") as ours:
        engine.predict(Xt)
    with pytest.raises(ValueError) as theirs:
        model.pipeline[-1].predict(Xt)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError, match="expects 30"):
        engine.predict(Xt[:, :5])


def test_histogram_boosting_routes_missing_and_infinite_values_as_sklearn() -> None:
    model = fitted("hist_gradient_boosting", "mixed_diabetes")
    engine = _ok("hist_gradient_boosting", "mixed_diabetes")
    Xt = np.asarray(preprocessed(model.pipeline, dataset("mixed_diabetes").X.iloc[:40]), np.float64)
    Xt[::4, 0] = np.nan
    Xt[1::4, 2] = np.inf
    Xt[2::4, 3] = -np.inf
    Xt[3::4, -1] = 99.0  # a category code never seen in training
    assert_same(engine, model.pipeline[-1], Xt)


def test_a_model_compiled_for_the_wrong_task_is_refused() -> None:
    X, y = _balanced_binary()
    pipeline = _passthrough_pipeline(RandomForestClassifier(n_estimators=3, random_state=RS), X, y)
    _, report = compile_model(pipeline, "regression", X, calibrate=False)
    assert report.reason == "RandomForestClassifier does not match the task 'regression'"


def test_rebuilding_refuses_an_engine_that_no_longer_answers_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = fitted("random_forest", "wine")
    _, report = compiled("random_forest", "wine")
    monkeypatch.setattr(CompiledModel, "_scores", _perturbed(1e-6))  # e.g. after an upgrade
    rebuilt, checked = rebuild(model.pipeline, "classification", report.as_dict())
    assert rebuilt is None and not checked.ok
    assert checked.reason is not None and "probabilities differ" in checked.reason


def test_one_engine_serves_concurrent_requests() -> None:
    engine = _ok("random_forest", "wine")
    Xt = preprocessed(fitted("random_forest", "wine").pipeline, dataset("wine").X)
    expected = engine.answer(Xt, with_proba=True).probabilities

    def serve(start: int) -> bool:
        rows = slice(start, start + 3)
        return all(
            np.array_equal(engine.answer(Xt[rows], with_proba=True).probabilities, expected[rows])
            for _ in range(50)
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(serve, range(0, 160, 10)))


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("gradient_boosting", "iris"),
        ("random_forest", "breast_cancer"),
        ("hist_gradient_boosting", "diabetes"),
    ],
)
def test_the_configuration_made_once_answers_as_treelites_public_predict(
    kind: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert gtil._PREDICT_WITH_CONFIG is not None, "treelite moved _predict_impl: see gtil.py"
    engine = _ok(kind, name)
    Xt = preprocessed(fitted(kind, name).pipeline, dataset(name).X)
    ours = engine.predict(Xt)
    scores = engine._scores(engine._input(Xt))
    monkeypatch.setattr(gtil, "_PREDICT_WITH_CONFIG", None)  # the public function
    np.testing.assert_array_equal(engine._scores(engine._input(Xt)), scores)
    np.testing.assert_array_equal(engine.predict(Xt), ours)


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("gradient_boosting", "iris"),
        ("random_forest", "breast_cancer"),
        ("hist_gradient_boosting", "diabetes"),
    ],
)
def test_gtils_c_function_called_directly_answers_as_treelites_own_call(
    kind: str, name: str
) -> None:
    """The direct call (gtil_call) against ``_predict_impl`` for 1, 2, 3 and all rows,
    both configurations: the same array (dtype, shape, bits); rows with fewer columns
    than the model (treelite pads them) go to treelite's call."""
    engine = _ok(kind, name)
    X = engine._input(preprocessed(fitted(kind, name).pipeline, dataset(name).X))
    assert X is not None
    impl = gtil._PREDICT_WITH_CONFIG
    assert impl is not None and gtil_call._C is not None, "treelite moved: see gtil_call.py"
    for config in gtil._CONFIGS.values():
        assert gtil_call._prepared(engine.model, config) is not None  # the direct way
        for rows in (X[:1], X[1:3], X[3:6], X):
            ours = gtil_call.predict_direct(engine.model, rows, config, impl)
            theirs = impl(engine.model, rows, config=config)
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
            np.testing.assert_array_equal(ours, theirs)
        narrow = np.ascontiguousarray(X[:2, :-1])
        padded = gtil_call.predict_direct(engine.model, narrow, config, impl)
        np.testing.assert_array_equal(padded, impl(engine.model, narrow, config=config))
        frozen = X[:3].copy()  # read-only rows: their address is numpy's to give
        frozen.flags.writeable = False
        ours = gtil_call.predict_direct(engine.model, frozen, config, impl)
        np.testing.assert_array_equal(ours, impl(engine.model, frozen, config=config))


def test_the_direct_call_builds_no_ctypes_helper_for_its_arrays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The addresses of the rows and of the output are read without ``ndarray.ctypes``
    (a helper object made per read, 2.5 us of a one-row call each), to the same address;
    a read-only array still gives numpy's."""
    import numpy._core._internal as numpy_internal

    made: list[int] = []
    helper = numpy_internal._ctypes
    monkeypatch.setattr(helper, "__init__", _counted(helper.__init__, made))
    engine = _ok("random_forest", "breast_cancer")
    X = engine._input(
        preprocessed(
            fitted("random_forest", "breast_cancer").pipeline, dataset("breast_cancer").X[:1]
        )
    )
    assert X is not None
    impl = gtil._PREDICT_WITH_CONFIG
    config = gtil._CONFIGS[False]
    gtil_call.predict_direct(engine.model, X, config, impl)
    assert made == []
    row = np.zeros(4)
    address = ctypes.cast(gtil_call._address(row), ctypes.c_void_p).value
    assert made == []
    assert address == row.ctypes.data
    row.flags.writeable = False
    assert gtil_call._address(row) == row.ctypes.data


def _counted(init: Any, made: list[int]) -> Any:
    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        init(self, *args, **kwargs)

    return counted


def test_two_class_ties_are_found_as_among_more_classes() -> None:
    """With two columns the top two are the two (|a - b|); the same flags, to the bit, as
    the partition that more classes take, ties and near ties included."""
    rng = np.random.default_rng(0)
    scores = rng.random((500, 2))
    scores[::7, 1] = scores[::7, 0]
    scores[1::7, 1] = scores[1::7, 0] + 1e-9
    scores[2::7, 1] = scores[2::7, 0] - 2e-9
    scores[3] = [-0.0, 0.0]
    index, close = gtil.first_max(scores)
    top = np.partition(scores, -2, axis=1)
    np.testing.assert_array_equal(index, np.argmax(scores, axis=1))
    np.testing.assert_array_equal(close, top[:, -1] - top[:, -2] <= gtil.TIE_MARGIN)
    assert 0 < close.sum() < len(close)


@pytest.mark.parametrize("nan_routed", [False, True])
def test_rows_within_float32_skip_the_careful_cast_for_the_same_rows(
    nan_routed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows whose every value is finite and within float32's range are cast without
    errstate or the finiteness checks: the very rows (or refusal) of the careful cast,
    at float32's bounds, beyond them, with NaN, infinities, -0.0 and subnormals."""
    from ensembles.inference import gtil

    top = float(np.finfo(np.float32).max)
    edges = [top, -top, np.nextafter(top, np.inf), 3.5e38, 1e-45, -0.0, 0.1, np.nan, np.inf]
    plan = gtil.Plan(float32=True, margin=False, link="identity", decision="proba")
    plan = replace(plan, nan_routed=nan_routed)
    rng = np.random.default_rng(5)
    cases = [np.array([[value, 1.5]]) for value in edges]
    cases += [rng.choice(edges, (3, 4)) for _ in range(30)] + [np.empty((0, 3))]
    fast = [gtil.cast_rows(X, plan) for X in cases]
    monkeypatch.setattr(gtil, "_FLOAT32_MAX", -1.0)  # every row the careful way
    careful = [gtil.cast_rows(X, plan) for X in cases]
    for X, a, b in zip(cases, fast, careful, strict=True):
        assert (a is None) == (b is None), X
        if a is not None and b is not None:
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), X
