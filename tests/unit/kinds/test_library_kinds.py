"""The boosting libraries as kinds (xgboost, lightgbm, catboost): the same model as the
library fitted directly, categories and missing values reaching it natively, early stopping on rows
carved from the training rows, progress and cancel per round, the submit-time checks,
nesting, and what the version records (curves, importances, lineage)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import catboost
import lightgbm
import numpy as np
import pandas as pd
import pytest
import xgboost
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder

from ensembles import prepare
from ensembles.catalog import KINDS, catalog_document, kind_of
from ensembles.data import TrainingData, select_training_data, table_from_frame
from ensembles.errors import SpecError, TrainingCancelledError
from ensembles.inference import inference_verdict
from ensembles.inference.cells import unseen_categories
from ensembles.inference.result import PredictOptions
from ensembles.jobs import library_versions
from ensembles.kinds.boosting_library import NO_MEMBERS_NOTE
from ensembles.parallel import MemberPool
from ensembles.row_checks import check_against_rows
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.splits import split_rows
from ensembles.tasks import Task
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

RS = 7
HOLDOUT = EvaluationSpec(holdout_fraction=0.25, cv_folds=0)
DATASET = {"classification": "wine", "regression": "diabetes"}
ROOT = Path(__file__).resolve().parents[3]
THREADS = MemberPool.local().threads

LIBRARY: dict[str, dict[Task, Any]] = {
    "xgboost": {"classification": xgboost.XGBClassifier, "regression": xgboost.XGBRegressor},
    "lightgbm": {"classification": lightgbm.LGBMClassifier, "regression": lightgbm.LGBMRegressor},
    "catboost": {
        "classification": catboost.CatBoostClassifier,
        "regression": catboost.CatBoostRegressor,
    },
}
# The parameter counting boosting rounds.
SIZE = {"xgboost": "n_estimators", "lightgbm": "n_estimators", "catboost": "iterations"}
PARAMS: dict[str, dict[str, Any]] = {
    "xgboost": {"n_estimators": 15, "max_depth": 3, "learning_rate": 0.2},
    "lightgbm": {"n_estimators": 15, "num_leaves": 7, "min_child_samples": 5},
    "catboost": {"iterations": 15, "depth": 3},
}
FIXED: dict[str, dict[str, Any]] = {
    "xgboost": {"verbosity": 0, "importance_type": "gain"},
    "lightgbm": {
        "verbose": -1,
        "importance_type": "gain",
        "deterministic": True,
        "force_col_wise": True,
    },
    "catboost": {"verbose": False, "allow_writing_files": False},
}
# The library's own names of the seed and the thread count.
SEED = {"xgboost": "random_state", "lightgbm": "random_state", "catboost": "random_seed"}
THREADS_PARAM = {"xgboost": "n_jobs", "lightgbm": "n_jobs", "catboost": "thread_count"}
CASES = [
    pytest.param(name, task, id=f"{name}-{task}")
    for name in LIBRARY
    for task in ("classification", "regression")
]


def _train(kind: str, task: Task, params: dict[str, Any], data: TrainingData | None = None) -> Any:
    data = data or training_data(DATASET[task])
    spec = resolve_ensemble(parse_estimator_spec({"kind": kind, "params": params}), task)
    return data, train(data, spec, HOLDOUT, RS)


def _train_rows(data: TrainingData, task: Task) -> tuple[pd.DataFrame, Any]:
    split = split_rows(data.y, task, HOLDOUT.holdout_fraction, RS)
    return data.X.iloc[split.train], np.asarray(data.y)[split.train]


def _direct(
    name: str, task: Task, params: dict[str, Any], threads: int = THREADS, **more: Any
) -> Any:
    own = {SEED[name]: RS, THREADS_PARAM[name]: threads}
    return LIBRARY[name][task](**FIXED[name], **params, **own, **more)


def _labels(answer: Any) -> Any:
    """CatBoost's multiclass ``predict`` answers a column; the service answers a vector."""
    return np.asarray(answer).reshape(len(answer))


@pytest.mark.parametrize(("name", "task"), CASES)
def test_the_model_is_the_library_fitted_directly_on_the_same_rows(name: str, task: Task) -> None:
    data, model = _train(name, task, PARAMS[name])
    X_train, y_train = _train_rows(data, task)
    direct = _direct(name, task, PARAMS[name]).fit(np.asarray(X_train, dtype=float), y_train)
    stored = model.pipeline[-1]
    # XGBoost's classifier is the kind's subclass (the table's classes; see below).
    assert isinstance(stored, LIBRARY[name][task])
    assert type(stored) is LIBRARY[name][task] or (name, task) == ("xgboost", "classification")
    # Fitted with the job's threads, stored with one (a fitted CatBoost model refuses
    # set_params: it keeps them, and its predict takes every core whatever it holds).
    stored_threads = THREADS if name == "catboost" else 1
    assert stored.get_params()[THREADS_PARAM[name]] == stored_threads
    X = data.X
    Xt = np.asarray(X, dtype=float)
    np.testing.assert_array_equal(model.pipeline.predict(X), direct.predict(Xt))
    inference = inference_verdict(model.pipeline, task, model.train_rows, RS)
    servable = prepare(model.pipeline, model.signature, inference)
    answer = servable.answer({c: X[c].to_numpy() for c in X.columns}, with_proba=True)
    assert answer.predictions.ndim == 1
    np.testing.assert_array_equal(answer.predictions, _labels(direct.predict(Xt)))
    if task == "classification":
        np.testing.assert_allclose(
            model.pipeline.predict_proba(X), direct.predict_proba(Xt), rtol=0, atol=1e-9
        )


def _table_with_categories(task: Task) -> TrainingData:
    rng = np.random.default_rng(3)
    n = 400
    colour = rng.choice(np.array(["red", "green", "blue", "grey"], dtype=object), n)
    size = rng.normal(size=n)
    size[rng.random(n) < 0.1] = np.nan
    colour[rng.random(n) < 0.05] = None
    signal = np.where(colour == "green", 2.0, 0.0) + np.nan_to_num(size)
    target = (signal > 0.5).astype(int) if task == "classification" else signal * 3 + 1
    frame = pd.DataFrame({"colour": colour, "size": size, "noise": rng.normal(size=n), "y": target})
    return select_training_data(table_from_frame(frame), "y")


@pytest.mark.parametrize(("name", "task"), CASES)
def test_categories_and_missing_values_reach_the_library_natively(name: str, task: Task) -> None:
    data = _table_with_categories(task)
    _, model = _train(name, task, PARAMS[name], data)
    preprocess, stored = model.pipeline[0], model.pipeline[-1]
    X_train, y_train = _train_rows(data, task)
    Xt = np.asarray(preprocess.transform(X_train))
    assert pd.isna(Xt).any(), "missing values stay missing (no imputation)"
    columns = list(preprocess.get_feature_names_out())
    codes = [i for i, c in enumerate(columns) if c.startswith("categorical__")]
    assert len(codes) == 1 and len(columns) == 3  # one code column, no one-hot
    if name == "lightgbm":
        direct = _direct(name, task, PARAMS[name]).fit(Xt, y_train, categorical_feature=codes)
        splits = str(stored.booster_.dump_model()["tree_info"])
        assert "'decision_type': '=='" in splits  # a categorical split
    elif name == "catboost":
        # Integer codes in an object matrix, missing as the code -1 (CatBoost refuses NaN
        # and floats among its categories); numbers stay floats, NaN where missing.
        assert all(type(v) is int for v in Xt[:, codes[0]])
        assert -1 in set(Xt[:, codes[0]])  # the missing colours
        direct = _direct(name, task, PARAMS[name], cat_features=codes).fit(Xt, y_train)
        assert stored.get_cat_feature_indices() == codes
    else:
        types = ["c" if i in codes else "q" for i in range(Xt.shape[1])]
        direct = _direct(name, task, PARAMS[name], enable_categorical=True, feature_types=types)
        direct.fit(Xt, y_train)
        assert stored.get_booster().feature_types == types
    X = data.X
    np.testing.assert_allclose(
        np.asarray(model.pipeline.predict(X), dtype=float),
        direct.predict(np.asarray(preprocess.transform(X))),
        rtol=0,
        atol=1e-9,
    )
    assert model.feature_importances is not None
    assert set(model.feature_importances) == {"colour", "size", "noise"}


@pytest.mark.parametrize("name", ["lightgbm", "catboost"])
def test_an_unseen_category_gets_the_warning_other_kinds_give(name: str) -> None:
    data = _table_with_categories("classification")
    _, model = _train(name, "classification", PARAMS[name], data)
    columns = {"colour": np.array(["purple"], dtype=object), "size": np.array([0.1])}
    columns["noise"] = np.array([0.0])
    warnings = unseen_categories(model.signature, columns)
    assert len(warnings) == 1 and "purple" in warnings[0]
    inference = inference_verdict(model.pipeline, "classification", model.train_rows, RS)
    answer = prepare(model.pipeline, model.signature, inference).answer(columns, with_proba=True)
    assert answer.probabilities.shape == (1, 2)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # LightGBM's eval_set
@pytest.mark.parametrize(("name", "task"), CASES)
def test_early_stopping_validates_on_rows_carved_from_the_training_rows(
    name: str, task: Task
) -> None:
    params = {**PARAMS[name], SIZE[name]: 400, "learning_rate": 0.5}
    params |= {"early_stopping_rounds": 3, "validation_fraction": 0.2}
    data, model = _train(name, task, params)
    stopping = model.metrics.stopping
    assert stopping is not None
    assert {"n_estimators", "best_iteration", "reason"} <= stopping.keys()
    assert stopping["best_iteration"] < 400 and "early stopping" in stopping["reason"]
    X_train, y_train = _train_rows(data, task)
    assert stopping["validation_rows"] == round(0.2 * len(y_train) + 0.4999)
    # The same split of the training rows, fitted directly with the same early stopping.
    rows = np.arange(len(y_train))
    stratify = y_train if task == "classification" else None
    fit_rows, valid_rows = (
        np.sort(r)
        for r in train_test_split(rows, test_size=0.2, random_state=RS, stratify=stratify)
    )
    Xt = np.asarray(X_train, dtype=float)
    valid = [(Xt[valid_rows], y_train[valid_rows])]
    base = {
        k: v for k, v in params.items() if k not in ("early_stopping_rounds", "validation_fraction")
    }
    if name == "lightgbm":
        direct = _direct(name, task, base)
        callbacks = [lightgbm.early_stopping(3, first_metric_only=True, verbose=False)]
        direct.fit(Xt[fit_rows], y_train[fit_rows], eval_set=valid, callbacks=callbacks)
    elif name == "catboost":
        direct = _direct(name, task, base)
        direct.fit(Xt[fit_rows], y_train[fit_rows], eval_set=valid[0], early_stopping_rounds=3)
    else:
        direct = _direct(name, task, base, early_stopping_rounds=3)
        direct.fit(Xt[fit_rows], y_train[fit_rows], eval_set=valid, verbose=False)
    assert stopping["best_iteration"] == KINDS[name].stages.count(model.pipeline[-1])  # type: ignore[union-attr]
    X = np.asarray(data.X, dtype=float)
    np.testing.assert_allclose(
        np.asarray(model.pipeline.predict(data.X), dtype=float),
        np.asarray(direct.predict(X), dtype=float),
        atol=1e-9,
    )


@pytest.mark.parametrize("name", list(LIBRARY))
def test_progress_counts_rounds_and_a_cancel_stops_at_the_next_round(name: str) -> None:
    data = training_data("wine")
    spec = resolve_ensemble(
        parse_estimator_spec({"kind": name, "params": {SIZE[name]: 5000}}), "classification"
    )
    cancel = threading.Event()
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int, stage: str) -> None:
        if stage == "fitting":
            seen.append((done, total))
            if done == 20:
                cancel.set()

    with pytest.raises(TrainingCancelledError):
        train(data, spec, HOLDOUT, RS, on_progress=progress, cancel=cancel)
    assert seen[:20] == [(i, 5000) for i in range(1, 21)]
    assert len(seen) <= 21  # the round in flight when cancelled, then it stops


@pytest.mark.parametrize("name", list(LIBRARY))
def test_the_version_records_the_staged_curve_importances_and_no_members(name: str) -> None:
    data, model = _train(name, "regression", PARAMS[name])
    curves = {c.name: c for c in model.metrics.curves}
    curve = curves["holdout_r2"]
    assert curve.x == [float(i) for i in range(1, 16)]
    assert curve.y[-1] == pytest.approx(model.metrics.holdout["r2"], abs=1e-9)
    assert model.metrics.estimators == []
    assert NO_MEMBERS_NOTE in model.metrics.notes
    assert model.metrics.hardest_rows is None and model.metrics.diversity is None
    assert model.feature_importances is not None
    assert set(model.feature_importances) == set(data.X.columns)
    assert model.training["n_estimators"] == 15
    assert name in library_versions(model.pipeline)


@pytest.mark.parametrize(
    ("raw", "task", "loc"),
    [
        ({"kind": "lightgbm", "params": {"n_leaves": 3}}, "classification", "n_leaves"),
        ({"kind": "lightgbm", "params": {"num_leaves": 1}}, "classification", "num_leaves"),
        ({"kind": "xgboost", "params": {"max_depth": "3"}}, "regression", "max_depth"),
        (
            {"kind": "xgboost", "params": {"objective": "reg:absoluteerror"}},
            "classification",
            "objective",
        ),
        ({"kind": "lightgbm", "params": {"objective": "binary"}}, "regression", "objective"),
        ({"kind": "lightgbm", "params": {"alpha": 0.5}}, "classification", "alpha"),
        ({"kind": "xgboost", "params": {"validation_fraction": 1.0}}, "regression", None),
        ({"kind": "catboost", "params": {"n_estimators": 10}}, "regression", "n_estimators"),
        ({"kind": "catboost", "params": {"depth": 17}}, "classification", "depth"),
        ({"kind": "catboost", "params": {"l2_leaf_reg": -1}}, "regression", "l2_leaf_reg"),
        ({"kind": "catboost", "params": {"learning_rate": 0}}, "regression", "learning_rate"),
        ({"kind": "catboost", "params": {"loss_function": "MAE"}}, "classification", None),
        ({"kind": "catboost", "params": {"loss_function": "Logloss"}}, "regression", None),
        ({"kind": "catboost", "params": {"delta": 2.0}}, "classification", "delta"),
        ({"kind": "catboost", "params": {"alpha": 1.0}}, "regression", "alpha"),
    ],
)
def test_parameters_are_checked_at_submit_with_their_path(
    raw: dict[str, Any], task: Task, loc: str | None
) -> None:
    with pytest.raises(SpecError) as caught:
        resolve_ensemble(parse_estimator_spec(raw), task)
    name = loc or next(iter(raw["params"]))
    assert [p.loc for p in caught.value.problems] == [("ensemble", "params", name)]


def test_the_catalog_gives_a_json_schema_and_the_extra() -> None:
    entries = {e["kind"]: e for e in catalog_document()["ensemble_kinds"]}
    for name in LIBRARY:
        entry = entries[name]
        assert entry["library"] == {"name": name, "extra": "boosting", "installed": True}
        schema = entry["params"]["regression"]
        assert schema["additionalProperties"] is False
        assert schema["properties"]["early_stopping_rounds"]["default"] is None
    cat_loss = entries["catboost"]["params"]["regression"]["properties"]["loss_function"]
    assert cat_loss["enum"] == ["RMSE", "MAE", "Huber", "Quantile"]
    lgb_objective = entries["lightgbm"]["params"]["regression"]["properties"]["objective"]
    assert lgb_objective["enum"] == ["l2", "l1", "huber", "quantile"]


def test_early_stopping_is_refused_on_a_nested_member() -> None:
    raw = {
        "kind": "bagging",
        "estimator": {"kind": "lightgbm", "params": {"early_stopping_rounds": 5}},
    }
    with pytest.raises(SpecError) as caught:
        resolve_ensemble(parse_estimator_spec(raw), "regression")
    [problem] = caught.value.problems
    assert problem.loc == ("ensemble", "estimator", "params", "early_stopping_rounds")
    assert "top-level" in problem.msg


def _named_classes(task_rows: str, names: list[str]) -> TrainingData:
    """A bundled table whose target holds class names instead of the codes 0..k-1."""
    frame = training_data(task_rows)
    y = np.asarray(names, dtype=object)[np.asarray(frame.y)]
    return select_training_data(table_from_frame(frame.X.assign(label=y)), "label")


@pytest.mark.parametrize(
    ("table", "names"),
    [("wine", ["barolo", "grignolino", "barbera"]), ("breast_cancer", ["neg", "pos"])],
    ids=["multiclass", "binary"],
)
def test_xgboost_takes_the_table_s_own_classes_at_the_top_level(
    table: str, names: list[str]
) -> None:
    """XGBoost's classifier takes only the codes 0..k-1: the kind's model is the library
    fitted directly on the encoded classes, answering the classes (sorted, as scikit-learn's
    classifiers order them); the compiled engine, margins and explanations agree."""
    data = _named_classes(table, names)
    spec = resolve_ensemble(parse_estimator_spec({"kind": "xgboost", "params": PARAMS["xgboost"]}),
                            "classification")  # fmt: skip
    assert check_against_rows(spec, HOLDOUT, np.asarray(data.y), "classification", RS) == []
    model = train(data, spec, HOLDOUT, RS)
    X_train, y_train = _train_rows(data, "classification")
    encoder = LabelEncoder().fit(y_train)
    direct = _direct("xgboost", "classification", PARAMS["xgboost"])
    direct.fit(np.asarray(X_train, dtype=float), encoder.transform(y_train))
    stored = model.pipeline[-1]
    assert isinstance(stored, xgboost.XGBClassifier)
    assert stored.classes_.tolist() == sorted(names)
    assert model.signature.classes == tuple(sorted(names))
    Xt = np.asarray(data.X, dtype=float)
    labels = encoder.inverse_transform(direct.predict(Xt))
    np.testing.assert_array_equal(model.pipeline.predict(data.X), labels)
    np.testing.assert_array_equal(model.pipeline.predict_proba(data.X), direct.predict_proba(Xt))
    np.testing.assert_array_equal(
        stored.predict(Xt, output_margin=True), direct.predict(Xt, output_margin=True)
    )
    inference = inference_verdict(model.pipeline, "classification", model.train_rows, RS)
    assert inference["engine"] == "treelite-gtil", inference
    servable = prepare(model.pipeline, model.signature, inference)
    answer = servable.answer({c: data.X[c].to_numpy() for c in data.X.columns}, with_proba=True)
    np.testing.assert_array_equal(answer.predictions, labels)
    np.testing.assert_allclose(answer.probabilities, direct.predict_proba(Xt), rtol=0, atol=1e-9)
    explained = model.metrics.explanations
    assert explained is not None and set(explained["mean_abs"]) <= set(names)
    holdout = model.metrics.holdout
    assert holdout is not None and holdout["accuracy"] > 0.8
    assert "ensemble-service" in library_versions(model.pipeline)


def test_xgboost_early_stopping_validates_on_the_table_s_own_classes() -> None:
    data = _named_classes("wine", ["barolo", "grignolino", "barbera"])
    params = {"n_estimators": 200, "learning_rate": 0.5, "early_stopping_rounds": 3}
    _, model = _train("xgboost", "classification", params, data)
    stopping = model.metrics.stopping
    assert stopping is not None and stopping["best_iteration"] < 200, stopping
    assert set(model.pipeline.predict(data.X)) <= {"barolo", "grignolino", "barbera"}


def test_xgboost_members_answer_the_table_s_own_classes_and_votes() -> None:
    """As a voting member (the ensemble hands it codes): labels, votes and probabilities
    from the compiled engine and from scikit-learn's members agree."""
    data = _named_classes("wine", ["barolo", "grignolino", "barbera"])
    raw = {
        "kind": "voting",
        "params": {"voting": "hard"},
        "estimators": [
            {"name": "xgb", "kind": "xgboost", "params": PARAMS["xgboost"]},
            {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            {"name": "xgb2", "kind": "xgboost", "params": {"n_estimators": 5}},
        ],
    }
    model = train(data, resolve_ensemble(parse_estimator_spec(raw), "classification"), HOLDOUT, RS)
    inference = inference_verdict(model.pipeline, "classification", model.train_rows, RS)
    servable = prepare(model.pipeline, model.signature, inference)
    columns = {c: data.X[c].to_numpy() for c in data.X.columns}
    answer = servable.predict(columns, PredictOptions(return_votes=True))
    expected = model.pipeline.predict(data.X)
    assert answer.predictions == expected.tolist()
    assert set(expected) <= {"barolo", "grignolino", "barbera"}
    assert answer.votes is not None
    for votes, label in zip(answer.votes, expected, strict=True):
        assert sum(votes.values()) == 3 and votes[label] == max(votes.values())


def test_only_the_service_s_own_classes_put_it_in_the_lineage() -> None:
    _, model = _train("xgboost", "regression", PARAMS["xgboost"])
    assert type(model.pipeline[-1]) is xgboost.XGBRegressor
    assert "ensemble-service" not in library_versions(model.pipeline)


def test_a_version_holding_xgboost_s_own_classifier_is_still_an_xgboost_version() -> None:
    """Versions trained before the kind's subclass hold the library's classifier."""
    assert kind_of(xgboost.XGBClassifier()) is KINDS["xgboost"]
    assert kind_of(xgboost.XGBRegressor()) is KINDS["xgboost"]


NESTED = [
    pytest.param(
        {"kind": "bagging", "params": {"n_estimators": 3}, "estimator": {"kind": "xgboost"}},
        id="xgboost-in-bagging",
    ),
    pytest.param(
        {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [
                {"name": "lgb", "kind": "lightgbm", "params": {"n_estimators": 10}},
                {"name": "xgb", "kind": "xgboost", "params": {"n_estimators": 10}},
            ],
        },
        id="lightgbm-and-xgboost-voting",
    ),
    pytest.param(
        {
            "kind": "ensemble_selection",
            "params": {"cv": 3, "max_steps": 4},
            "estimators": [
                {"name": "lgb", "kind": "lightgbm", "params": {"n_estimators": 10}},
                {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            ],
        },
        id="lightgbm-in-ensemble-selection",
    ),
    pytest.param(
        {
            "kind": "bagging",
            "params": {"n_estimators": 3},
            "estimator": {"kind": "catboost", "params": {"iterations": 20, "depth": 3}},
        },
        id="catboost-in-bagging",
    ),
    pytest.param(
        {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [
                {"name": "cat", "kind": "catboost", "params": {"iterations": 20}},
                {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            ],
        },
        id="catboost-in-voting",
    ),
    pytest.param(
        {
            "kind": "stacking",
            "params": {"cv": 3},
            "estimators": [
                {"name": "cat", "kind": "catboost", "params": {"iterations": 20}},
                {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            ],
        },
        id="catboost-in-stacking",
    ),
    pytest.param(
        {
            "kind": "ensemble_selection",
            "params": {"cv": 3, "max_steps": 4},
            "estimators": [
                {"name": "cat", "kind": "catboost", "params": {"iterations": 20}},
                {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            ],
        },
        id="catboost-in-ensemble-selection",
    ),
]


@pytest.mark.parametrize("raw", NESTED)
def test_a_library_kind_is_a_member_anywhere(raw: dict[str, Any]) -> None:
    data = training_data("wine")
    spec = resolve_ensemble(parse_estimator_spec(raw), "classification")
    model: FittedModel = train(data, spec, HOLDOUT, RS)
    assert model.metrics.holdout is not None and model.metrics.holdout["accuracy"] > 0.8
    inference = inference_verdict(model.pipeline, "classification", model.train_rows, RS)
    servable = prepare(model.pipeline, model.signature, inference)
    columns = {c: data.X[c].to_numpy() for c in data.X.columns}
    answer = servable.answer(columns, with_proba=True)
    np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(data.X))


@pytest.mark.parametrize("name", ["lightgbm", "catboost"])
def test_a_kind_whose_library_is_missing_is_listed_and_refused_naming_the_extra(
    name: str,
) -> None:
    script = (
        "import sys\n"
        f"sys.modules['{name}'] = None\n"  # the import fails as if it were not installed
        "from ensembles.catalog import catalog_document\n"
        "from ensembles.errors import SpecError\n"
        "from ensembles.specs import parse_estimator_spec\n"
        "from ensembles.validation import resolve_ensemble\n"
        "entries = {e['kind']: e for e in catalog_document()['ensemble_kinds']}\n"
        f"assert entries['{name}']['library']['installed'] is False\n"
        "try:\n"
        f"    resolve_ensemble(parse_estimator_spec({{'kind': '{name}'}}), 'regression')\n"
        "except SpecError as exc:\n"
        "    [p] = exc.problems\n"
        "    print(p.loc, p.msg)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.startswith("('ensemble', 'kind')")
    assert "ensemble-service[boosting]" in out.stdout


@pytest.mark.parametrize("name", list(LIBRARY))
def test_cross_validation_and_bias_variance_refit_the_library_kind(name: str) -> None:
    """The folds and bootstrap rounds are fitted as training fits (early stopping too);
    bias-variance's single tree takes only the parameters a tree accepts (LightGBM's
    max_depth -1 is not one)."""
    params = {SIZE[name]: 30, "early_stopping_rounds": 3}
    spec = resolve_ensemble(parse_estimator_spec({"kind": name, "params": params}), "regression")
    evaluation = EvaluationSpec.model_validate(
        {"holdout_fraction": 0.25, "cv_folds": 3, "bias_variance": {"rounds": 3}}
    )
    model = train(training_data("diabetes"), spec, evaluation, RS)
    assert model.metrics.cv is not None and model.metrics.cv["n_folds"] == 3
    assert model.metrics.bias_variance is not None
    assert model.metrics.bias_variance["member_spec"]["kind"] == "decision_tree"


@pytest.mark.parametrize("name", list(LIBRARY))
@pytest.mark.parametrize("dataset", ["wine", "breast_cancer", "diabetes"])
def test_the_staged_answers_are_the_librarys_after_k_rounds(name: str, dataset: str) -> None:
    """LightGBM's curve adds up the raw scores of the rounds between marks: the labels
    and values it gives are the library's own ``predict`` after k rounds."""
    task: Task = "regression" if dataset == "diabetes" else "classification"
    data, model = _train(name, task, PARAMS[name], training_data(dataset))
    stored = model.pipeline[-1]
    Xt = np.asarray(data.X, dtype=float)
    marks = [1, 2, 7, 15]
    staged = KINDS[name].stages.predict(stored, Xt, marks)  # type: ignore[union-attr]
    for k, answer in zip(marks, staged, strict=True):
        if name == "lightgbm":
            expected = stored.predict(Xt, num_iteration=k)
        elif name == "xgboost":
            expected = stored.predict(Xt, iteration_range=(0, k))
        else:
            expected = _labels(stored.predict(Xt, ntree_end=k))
        if task == "classification":
            np.testing.assert_array_equal(answer, expected)
        else:
            np.testing.assert_allclose(answer, expected, rtol=0, atol=1e-9)


LOSSES = [
    ({"loss_function": "RMSE"}, "RMSE"),
    ({"loss_function": "MAE"}, "MAE"),
    ({"loss_function": "Huber", "delta": 2.5}, "Huber:delta=2.5"),
    ({"loss_function": "Quantile", "alpha": 0.8}, "Quantile:alpha=0.8"),
]


@pytest.mark.parametrize(("params", "loss"), LOSSES, ids=[loss for _, loss in LOSSES])
def test_catboost_regression_losses_reach_it_with_their_parameter(
    params: dict[str, Any], loss: str
) -> None:
    data, model = _train("catboost", "regression", {**PARAMS["catboost"], **params})
    stored = model.pipeline[-1]
    assert stored.get_params()["loss_function"] == loss
    X_train, y_train = _train_rows(data, "regression")
    direct = _direct("catboost", "regression", {**PARAMS["catboost"], "loss_function": loss})
    direct.fit(np.asarray(X_train, dtype=float), y_train)
    Xt = np.asarray(data.X, dtype=float)
    np.testing.assert_allclose(model.pipeline.predict(data.X), direct.predict(Xt), atol=1e-9)


def test_catboost_is_the_same_model_whatever_its_thread_count() -> None:
    """CatBoost is deterministic for a seed whatever its threads: the service's fit (the
    job's threads) equals a direct fit in one thread, bit for bit."""
    data, model = _train("catboost", "classification", PARAMS["catboost"])
    X_train, y_train = _train_rows(data, "classification")
    direct = _direct("catboost", "classification", PARAMS["catboost"], threads=1)
    direct.fit(np.asarray(X_train, dtype=float), y_train)
    Xt = np.asarray(data.X, dtype=float)
    np.testing.assert_array_equal(model.pipeline.predict_proba(data.X), direct.predict_proba(Xt))


def test_catboost_writes_nothing_into_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CatBoost writes catboost_info/ into the working directory unless told not to."""
    monkeypatch.chdir(tmp_path)
    params = {**PARAMS["catboost"], "early_stopping_rounds": 3}
    _train("catboost", "classification", params)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("raw", "loc"),
    [
        (
            {
                "kind": "voting",
                "params": {"voting": "hard"},
                "estimators": [
                    {"name": "cat", "kind": "catboost"},
                    {"name": "tree", "kind": "decision_tree"},
                ],
            },
            ("ensemble", "estimators", 0, "kind"),
        ),
        (
            {"kind": "adaboost", "params": {"n_estimators": 5}, "estimator": {"kind": "catboost"}},
            ("ensemble", "estimator", "kind"),
        ),
    ],
    ids=["hard-voting", "adaboost"],
)
def test_catboost_is_refused_where_its_labels_are_counted(
    raw: dict[str, Any], loc: tuple[Any, ...]
) -> None:
    """Its multiclass predict answers a column: scikit-learn's hard voting and AdaBoost,
    which count members' labels, would fail the job; refused at submit instead."""
    with pytest.raises(SpecError) as caught:
        resolve_ensemble(parse_estimator_spec(raw), "classification")
    [problem] = caught.value.problems
    assert problem.loc == loc
    assert "'catboost' answers its labels as a column" in problem.msg
    regression = {**raw, "params": {k: v for k, v in raw["params"].items() if k != "voting"}}
    resolve_ensemble(parse_estimator_spec(regression), "regression")  # a vector of values


def test_catboost_multiclass_folds_and_bias_variance_read_its_labels_as_a_vector() -> None:
    """Its multiclass predict answers a column: the out-of-fold and bias-variance labels
    are read flat (predicted_labels), not as lists."""
    params = {"iterations": 20, "early_stopping_rounds": 3}
    spec = resolve_ensemble(
        parse_estimator_spec({"kind": "catboost", "params": params}), "classification"
    )
    evaluation = EvaluationSpec.model_validate(
        {"holdout_fraction": 0.25, "cv_folds": 3, "bias_variance": {"rounds": 3}}
    )
    model = train(training_data("wine"), spec, evaluation, RS)
    assert model.metrics.cv is not None and model.metrics.cv["accuracy"] > 0.8
    assert model.metrics.bias_variance is not None
    assert model.metrics.bias_variance["ensemble"]["loss"] < 0.3


def test_early_stopping_keeps_every_class_in_the_rows_it_fits_on() -> None:
    """A class of one training row cannot be stratified: it stays in the fit rows, and the
    model knows every class (a plain split could have moved it to validation)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=80), "z": rng.normal(size=80)})
    frame["y"] = np.where(frame["x"] > 0, 1, 0)
    frame.loc[1, "y"] = 2  # one row of class 2, which a plain split would hold out
    data = select_training_data(table_from_frame(frame), "y")
    params = {"n_estimators": 50, "min_child_samples": 2, "early_stopping_rounds": 3}
    params["validation_fraction"] = 0.5
    spec = resolve_ensemble(
        parse_estimator_spec({"kind": "lightgbm", "params": params}), "classification"
    )
    model = train(data, spec, EvaluationSpec(holdout_fraction=0.0, cv_folds=0), RS)
    assert list(model.pipeline.classes_) == [0, 1, 2]
    assert model.metrics.stopping is not None and model.metrics.stopping["validation_rows"] <= 40
