"""Prediction: the pipeline's own answers by default, members' votes recomputed exactly.

Every prediction here takes the service's path: checked columns (``check_rows``) into a
prepared servable's ``predict``, its ``Prediction`` written as the service writes it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine
from sklearn.pipeline import Pipeline

from ensembles.builders import FeatureColumn, build_pipeline, known_categories
from ensembles.catalog import KINDS
from ensembles.errors import PredictionInputError, TooLargeError
from ensembles.inference import (
    MAX_PROBLEMS,
    Prediction,
    PredictOptions,
    Rows,
    check_rows,
    prepare,
)
from ensembles.signature import ModelSignature
from ensembles.specs import parse_estimator_spec
from ensembles.tasks import Task
from ensembles.validation import resolve_ensemble

Model = tuple[Pipeline, ModelSignature, pd.DataFrame]
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

# --- fixtures: small models fitted once per session ------------------------------------


@cache
def dataset(name: str) -> tuple[pd.DataFrame, np.ndarray[Any, Any]]:
    """Features as a frame, labels as plain Python strings (classification) or floats."""
    loader = {
        "iris": load_iris,
        "wine": load_wine,
        "breast_cancer": load_breast_cancer,
        "diabetes": load_diabetes,
    }[name]
    bunch = loader(as_frame=True)
    X = bunch.data.copy()
    X.columns = [c.replace(" ", "_").replace("(cm)", "cm") for c in X.columns]
    if name == "diabetes":
        return X, bunch.target.to_numpy(dtype=np.float64)
    names = np.asarray(bunch.target_names, dtype=object)
    return X, names[bunch.target.to_numpy()]


def default_voting(kind: str, task: Task, pipeline: Pipeline) -> Any:
    ensemble, traits = pipeline[-1], KINDS[kind]
    if task == "regression" or not traits.votes:
        return None
    if traits.voting_param is not None:
        return getattr(ensemble, traits.voting_param)
    return "soft" if hasattr(ensemble.estimators_[0], "predict_proba") else "hard"


def dtype_of(series: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(series) or set(series.dropna().map(type)) == {bool}:
        return "bool"
    if pd.api.types.is_integer_dtype(series):
        return "int64"
    return "float64" if pd.api.types.is_float_dtype(series) else "string"


def fit(spec: dict[str, Any], task: Task, X: pd.DataFrame, y: np.ndarray[Any, Any]) -> Model:
    features = [FeatureColumn(str(c), dtype_of(X[c]), bool(X[c].isna().any())) for c in X.columns]
    resolved = resolve_ensemble(parse_estimator_spec(spec), task)
    pipeline = build_pipeline(resolved, task, features, random_state=0).fit(X, y)
    classes = tuple(pipeline.classes_.tolist()) if task == "classification" else None
    voting = default_voting(resolved.kind, task, pipeline)
    categories = known_categories(pipeline[0])
    signature = ModelSignature(task, resolved.kind, tuple(features), classes, voting, categories)
    return pipeline, signature, X


def members(*specs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"name": name, "kind": kind} for name, kind in specs]


LR_DT_NB = [
    {"name": "lr", "kind": "logistic_regression", "params": {"max_iter": 1000}},
    *members(("dt", "decision_tree"), ("nb", "gaussian_nb")),
]
SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "soft_voting": (
        "iris",
        {
            "kind": "voting",
            "params": {"voting": "soft", "weights": [2, 1, 1]},
            "estimators": LR_DT_NB,
        },
    ),
    "hard_voting": (
        "wine",
        {
            "kind": "voting",
            "params": {"voting": "hard", "weights": [1, 2, 1]},
            "estimators": LR_DT_NB,
        },
    ),
    "fractional_voting": (
        "iris",
        {
            "kind": "voting",
            "params": {"voting": "hard", "weights": [0.5, 1.5, 1]},
            "estimators": LR_DT_NB,
        },
    ),
    "tie_voting": (
        "iris",
        {
            "kind": "voting",
            "params": {"voting": "hard"},
            "estimators": [
                {"name": "stump", "kind": "decision_tree", "params": {"max_depth": 1}},
                {"name": "nb", "kind": "gaussian_nb"},
            ],
        },
    ),
    "ridge_voting": (
        "iris",
        {"kind": "voting", "estimators": members(("lr", "logistic_regression"), ("r", "ridge"))},
    ),
    "forest": ("wine", {"kind": "random_forest", "params": {"n_estimators": 15, "max_depth": 3}}),
    "bagging_subsets": (
        "breast_cancer",
        {
            "kind": "bagging",
            "params": {"n_estimators": 7, "max_features": 0.4},
            "estimator": {"kind": "decision_tree", "params": {"max_depth": 2}},
        },
    ),
    "ridge_bagging": (
        "iris",
        {"kind": "bagging", "params": {"n_estimators": 5}, "estimator": {"kind": "ridge"}},
    ),
    "gradient_boosting": ("iris", {"kind": "gradient_boosting", "params": {"n_estimators": 10}}),
    "stacking": ("iris", {"kind": "stacking", "estimators": LR_DT_NB[1:]}),
    "voting_regressor": (
        "diabetes",
        {
            "kind": "voting",
            "params": {"weights": [1, 2, 1]},
            "estimators": members(
                ("ols", "linear_regression"), ("dt", "decision_tree"), ("knn", "knn")
            ),
        },
    ),
    "subspace_regressor": (
        "diabetes",
        {"kind": "random_subspace", "params": {"n_estimators": 6, "max_features": 0.5}},
    ),
    "forest_regressor": ("diabetes", {"kind": "random_forest", "params": {"n_estimators": 12}}),
    "boosting_regressor": (
        "diabetes",
        {"kind": "gradient_boosting", "params": {"n_estimators": 10}},
    ),
}
CLASSIFIERS = [k for k, (data, _) in SPECS.items() if data != "diabetes"]


@cache
def model(name: str) -> Model:
    data, spec = SPECS[name]
    X, y = dataset(data)
    return fit(spec, "regression" if data == "diabetes" else "classification", X, y)


@dataclass(frozen=True)
class Written:
    """A prediction as the service writes it (``as_dict`` through orjson), read back."""

    document: dict[str, Any]
    predictions: list[Any]
    probabilities: list[list[float]] | None = None
    votes: list[dict[str, int]] | None = None
    weighted_votes: list[dict[str, float | int]] | None = None
    agreement: list[float] | None = None
    std: list[float] | None = None


def written(prediction: Prediction) -> Written:
    document = orjson.loads(orjson.dumps(prediction.as_dict(), option=orjson.OPT_SERIALIZE_NUMPY))
    return Written(document, **document)


def predict(
    pipeline: Pipeline, signature: ModelSignature, rows: Rows, options: PredictOptions
) -> Written:
    """The prediction for checked columns (or a frame of them), by the version's servable."""
    return written(prepare(pipeline, signature, None).predict(rows, options))


def checked_frame(
    signature: ModelSignature, instances: object, max_rows: int | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """The checked columns as one frame, each column in the dtype it was checked into,
    and the warnings."""
    columns, warnings = check_rows(signature, instances, max_rows)
    frame = pd.DataFrame({n: pd.Series(a, dtype=a.dtype, copy=False) for n, a in columns.items()})
    return frame, warnings


def run(name: str, **options: Any) -> Written:
    pipeline, signature, X = model(name)
    return predict(pipeline, signature, X, PredictOptions(**options))


def member_matrix(name: str) -> np.ndarray[Any, Any]:
    pipeline, _, X = model(name)
    return np.asarray(pipeline[:-1].transform(X), dtype=np.float64)


def hard_by_hand(
    name: str, weighted: bool = True
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(weighted vote tallies per row and class, winning class index) straight from sklearn;
    ``weighted=False``: each member's vote counts once."""
    pipeline, _, _ = model(name)
    ensemble, Xt = pipeline[-1], member_matrix(name)
    features = getattr(ensemble, "estimators_features_", [None] * len(ensemble.estimators_))
    weights = getattr(ensemble, "weights", None) or [1.0] * len(ensemble.estimators_)
    if not weighted:
        weights = [1.0] * len(ensemble.estimators_)
    picks = [
        est.predict(Xt if f is None else Xt[:, f]).astype(int)
        for est, f in zip(ensemble.estimators_, features, strict=True)
    ]
    k = len(ensemble.classes_)
    counts = np.array([np.bincount(row, weights=weights, minlength=k) for row in np.array(picks).T])
    return counts, np.argmax(counts, axis=1)


def labels(signature: ModelSignature) -> tuple[Any, ...]:
    assert signature.classes is not None
    return signature.classes


def problem_locs(exc: pytest.ExceptionInfo[PredictionInputError]) -> list[tuple[Any, ...]]:
    return [p.loc for p in exc.value.problems]


# --- default path: exactly the stored pipeline ------------------------------------------


@pytest.mark.parametrize("name", [*CLASSIFIERS, "voting_regressor", "forest_regressor"])
def test_default_predictions_are_the_pipelines(name: str) -> None:
    pipeline, _, X = model(name)
    assert run(name).predictions == pipeline.predict(X).tolist()


@pytest.mark.parametrize(
    "name", ["soft_voting", "forest", "bagging_subsets", "gradient_boosting", "stacking"]
)
def test_default_probabilities_are_the_pipelines(name: str) -> None:
    pipeline, _, X = model(name)
    result = run(name, return_proba=True)
    assert result.probabilities == pipeline.predict_proba(X).tolist()
    assert result.predictions == pipeline.predict(X).tolist()


def test_labels_are_plain_json_values() -> None:
    result = run("forest", return_votes=True, return_proba=True)
    assert {type(p) for p in result.predictions} == {str}
    assert {type(v) for row in result.votes or [] for v in row.values()} == {int}
    assert {type(a) for a in result.agreement or []} == {float}


def test_voting_equal_to_the_models_own_is_the_default_path() -> None:
    assert run("hard_voting", voting="hard") == run("hard_voting")
    assert run("forest", voting="soft", return_proba=True) == run("forest", return_proba=True)


# --- voting override -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["forest", "bagging_subsets", "soft_voting"])
def test_hard_override_is_the_weighted_majority_of_members(name: str) -> None:
    _, signature, _ = model(name)
    counts, winner = hard_by_hand(name)
    result = run(name, voting="hard", return_proba=True)
    assert result.predictions == [labels(signature)[i] for i in winner]
    assert result.probabilities == (counts / counts.sum(axis=1, keepdims=True)).tolist()


@pytest.mark.parametrize("name", ["bagging_subsets", "soft_voting"])
def test_hard_override_is_not_the_default_answer(name: str) -> None:
    # These models' hard and soft votes disagree on a few rows: the override took effect.
    assert run(name, voting="hard").predictions != run(name).predictions


def test_soft_override_on_hard_voting_is_the_weighted_mean_probability() -> None:
    pipeline, signature, _ = model("hard_voting")
    Xt = member_matrix("hard_voting")
    probas = [est.predict_proba(Xt) for est in pipeline[-1].estimators_]
    expected = np.average(probas, axis=0, weights=[1, 2, 1])
    result = run("hard_voting", voting="soft", return_proba=True)
    assert result.probabilities == expected.tolist()
    assert result.predictions == [labels(signature)[i] for i in np.argmax(expected, 1)]


def test_soft_override_matches_sklearns_soft_voting_of_the_same_members() -> None:
    pipeline, _, X = model("hard_voting")
    ensemble = pipeline[-1]
    ensemble.voting = "soft"
    try:
        expected = pipeline.predict(X).tolist(), pipeline.predict_proba(X).tolist()
    finally:
        ensemble.voting = "hard"
    result = run("hard_voting", voting="soft", return_proba=True)
    assert (result.predictions, result.probabilities) == expected


def test_ties_go_to_the_first_class() -> None:
    pipeline, signature, X = model("tie_voting")
    Xt = member_matrix("tie_voting")
    stump, nb = (est.predict(Xt) for est in pipeline[-1].estimators_)
    tied = np.flatnonzero(stump != nb)
    assert tied.size > 0
    result = run("tie_voting", return_votes=True)
    classes = signature.classes or ()
    for row in tied:
        first = min(stump[row], nb[row])
        assert result.predictions[row] == classes[first]
        assert result.votes is not None and result.agreement is not None
        assert result.votes[row] == {classes[stump[row]]: 1, classes[nb[row]]: 1}
        assert result.agreement[row] == 0.5
    assert result.predictions == pipeline.predict(X).tolist()  # sklearn breaks ties the same way


def test_tie_in_a_hard_override_goes_to_the_first_class() -> None:
    _, signature, X = model("tie_voting")
    soft = fit(
        {**SPECS["tie_voting"][1], "params": {"voting": "soft"}}, "classification", *dataset("iris")
    )
    result = predict(soft[0], soft[1], X, PredictOptions(voting="hard"))
    assert result.predictions == run("tie_voting").predictions
    assert signature.classes == soft[1].classes


# --- votes and agreement ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["soft_voting", "forest", "bagging_subsets", "fractional_voting"])
def test_votes_and_agreement_by_hand(name: str) -> None:
    _, signature, _ = model(name)
    classes = signature.classes or ()
    tallies, _ = hard_by_hand(name)
    counts, _ = hard_by_hand(name, weighted=False)
    result = run(name, return_votes=True)
    predicted = [classes.index(p) for p in result.predictions]
    voted = [[j for j, c in enumerate(row) if c > 0] for row in counts]
    assert result.votes == [
        {str(classes[j]): int(row[j]) for j in js} for row, js in zip(counts, voted, strict=True)
    ]
    weighted = name in ("soft_voting", "fractional_voting")
    assert result.weighted_votes == (
        [{str(classes[j]): row[j] for j in js} for row, js in zip(tallies, voted, strict=True)]
        if weighted
        else None
    )
    assert result.agreement == [
        row[j] / row.sum() for row, j in zip(tallies, predicted, strict=True)
    ]


def test_votes_count_members_and_weighted_tallies_keep_the_weights_type() -> None:
    whole = run("soft_voting", return_votes=True)  # weights 2, 1, 1
    fractional = run("fractional_voting", return_votes=True)  # weights 0.5, 1.5, 1
    for result in (whole, fractional):
        assert {type(v) for row in result.votes or [] for v in row.values()} == {int}
        assert all(sum(row.values()) == 3 for row in result.votes or [])
    assert {type(v) for row in whole.weighted_votes or [] for v in row.values()} == {int}
    assert {type(v) for row in fractional.weighted_votes or [] for v in row.values()} == {float}
    assert all(sum(row.values()) == 4 for row in whole.weighted_votes or [])
    assert all(sum(row.values()) == 3.0 for row in fractional.weighted_votes or [])
    assert len(whole.weighted_votes or []) == len(whole.predictions)


def test_unweighted_models_give_no_weighted_tallies() -> None:
    for name in ("forest", "tie_voting"):
        result = run(name, return_votes=True)
        assert result.votes is not None and result.weighted_votes is None
        assert "weighted_votes" not in result.document


def test_a_weighted_hard_vote_follows_the_weights_not_the_head_count() -> None:
    """Weights 0.5, 1.5, 1: on rows where dt (1.5) alone ties lr and nb together (0.5 + 1),
    the two members' class has the most votes, but the weighted tie goes to the first
    class, as in scikit-learn: the head count in ``votes`` does not decide."""
    _, signature, X = model("fractional_voting")
    classes = labels(signature)
    _, winner = hard_by_hand("fractional_voting")
    _, majority = hard_by_hand("fractional_voting", weighted=False)
    disagree = np.flatnonzero(winner != majority)
    assert disagree.size > 0
    result = run("fractional_voting", return_votes=True)
    assert result.predictions == [classes[i] for i in winner]
    assert result.predictions == model("fractional_voting")[0].predict(X).tolist()
    for row in disagree.tolist():
        assert result.votes is not None and result.weighted_votes is not None
        predicted = str(result.predictions[row])
        assert result.votes[row][predicted] < max(result.votes[row].values())
        assert result.weighted_votes[row][predicted] == max(result.weighted_votes[row].values())


# --- regression spread ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["voting_regressor", "subspace_regressor", "forest_regressor"])
def test_std_is_the_population_std_of_member_predictions(name: str) -> None:
    pipeline, _, X = model(name)
    ensemble, Xt = pipeline[-1], member_matrix(name)
    features = getattr(ensemble, "estimators_features_", [None] * len(ensemble.estimators_))
    values = [
        est.predict(Xt if f is None else Xt[:, f])
        for est, f in zip(ensemble.estimators_, features, strict=True)
    ]
    result = run(name, return_std=True)
    assert result.std == np.std(values, axis=0, ddof=0).tolist()
    assert result.predictions == pipeline.predict(X).tolist()
    assert len(result.std or []) == len(X)


# --- option errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "options", "loc", "words"),
    [
        ("gradient_boosting", {"voting": "hard"}, "voting", "gradient_boosting does not combine"),
        ("stacking", {"voting": "soft"}, "voting", "does not combine members by vote"),
        ("voting_regressor", {"voting": "hard"}, "voting", "classification only"),
        ("ridge_voting", {"voting": "soft"}, "voting", "r give none"),
        ("ridge_bagging", {"voting": "soft"}, "voting", "probabilities from every member"),
        ("soft_voting", {"voting": "average"}, "voting", "'hard' or 'soft'"),
        ("gradient_boosting", {"return_votes": True}, "return_votes", "does not combine"),
        ("forest_regressor", {"return_votes": True}, "return_votes", "classification only"),
        ("forest", {"return_std": True}, "return_std", "regression only"),
        ("boosting_regressor", {"return_std": True}, "return_std", "gradient_boosting has no"),
        ("hard_voting", {"return_proba": True}, "return_proba", "set options.voting to 'soft'"),
        ("ridge_voting", {"return_proba": True}, "return_proba", "no probabilities"),
        ("forest_regressor", {"return_proba": True}, "return_proba", "classification only"),
    ],
)
def test_option_errors_name_the_option(
    name: str, options: dict[str, Any], loc: str, words: str
) -> None:
    with pytest.raises(PredictionInputError) as exc:
        run(name, **options)
    assert problem_locs(exc) == [("options", loc)]
    assert words in exc.value.problems[0].msg


def test_all_option_errors_are_reported_together() -> None:
    with pytest.raises(PredictionInputError) as exc:
        run(
            "boosting_regressor",
            voting="soft",
            return_votes=True,
            return_std=True,
            return_proba=True,
        )
    assert problem_locs(exc) == [
        ("options", o) for o in ("voting", "return_votes", "return_std", "return_proba")
    ]


def test_bagging_of_members_without_probabilities_gives_the_pipelines_vote_shares() -> None:
    pipeline, _, X = model("ridge_bagging")
    result = run("ridge_bagging", voting="hard", return_proba=True)
    assert result.probabilities == pipeline.predict_proba(X).tolist()


# --- rows in ----------------------------------------------------------------------------


IRIS = model("soft_voting")[1]
ROW = {"sepal_length_cm": 5.1, "sepal_width_cm": 3.5, "petal_length_cm": 1.4, "petal_width_cm": 0.2}
NAMES = list(ROW)


def bad_rows(instances: object, signature: ModelSignature = IRIS) -> list[tuple[Any, ...]]:
    with pytest.raises(PredictionInputError) as exc:
        checked_frame(signature, instances)
    return problem_locs(exc)


def messages(instances: object) -> list[str]:
    with pytest.raises(PredictionInputError) as exc:
        checked_frame(IRIS, instances)
    return [p.msg for p in exc.value.problems]


def test_records_and_columnar_give_identical_results() -> None:
    pipeline, signature, X = model("soft_voting")
    records = X.to_dict(orient="records")
    columnar = {"columns": list(X.columns), "data": X.to_numpy().tolist()}
    (by_records, _), (by_columns, _) = (
        checked_frame(signature, records),
        checked_frame(signature, columnar),
    )
    pd.testing.assert_frame_equal(by_records, by_columns)
    pd.testing.assert_frame_equal(by_records, X)
    options = PredictOptions(return_proba=True, return_votes=True)
    assert predict(pipeline, signature, by_records, options) == predict(
        pipeline, signature, by_columns, options
    )


def test_extra_columns_are_ignored_and_reported() -> None:
    frame, warnings = checked_frame(IRIS, [{**ROW, "id": 7, "note": "x"}, {**ROW, "id": 8}])
    assert list(frame.columns) == NAMES
    assert warnings == ["extra columns ignored: id, note"]
    columnar = {"columns": ["id", *reversed(NAMES), "note"], "data": [[1, 0.2, 1.4, 3.5, 5.1, "x"]]}
    frame, warnings = checked_frame(IRIS, columnar)
    assert frame.iloc[0].tolist() == list(ROW.values())
    assert warnings == ["extra columns ignored: id, note"]
    assert checked_frame(IRIS, [ROW])[1] == []


@pytest.mark.parametrize("instances", [None, "rows", 3, {"records": [ROW]}, {"columns": NAMES}])
def test_instances_of_the_wrong_shape(instances: object) -> None:
    assert bad_rows(instances) == [("instances",)]


@pytest.mark.parametrize("instances", [[], {"columns": NAMES, "data": []}])
def test_no_instances(instances: object) -> None:
    assert bad_rows(instances) == [("instances",)]


def test_too_many_rows() -> None:
    with pytest.raises(TooLargeError) as exc:
        checked_frame(IRIS, [ROW] * 3, max_rows=2)
    assert [p.loc for p in exc.value.problems] == [("instances",)]
    with pytest.raises(TooLargeError):
        checked_frame(IRIS, {"columns": NAMES, "data": [list(ROW.values())] * 3}, max_rows=2)
    assert len(checked_frame(IRIS, [ROW] * 2, max_rows=2)[0]) == 2


def test_a_record_that_is_not_an_object() -> None:
    assert bad_rows([ROW, [1, 2, 3, 4], ROW]) == [("instances", 1)]


def test_columnar_rows_of_the_wrong_length_and_bad_parts() -> None:
    data = [list(ROW.values()), [1.0, 2.0], "x"]
    assert bad_rows({"columns": NAMES, "data": data}) == [
        ("instances", "data", 1),
        ("instances", "data", 2),
    ]
    assert bad_rows({"columns": "a,b", "data": [[1]]}) == [("instances", "columns")]
    assert bad_rows({"columns": NAMES, "data": "x"}) == [("instances", "data")]


def test_missing_column_in_columnar_input_is_named() -> None:
    columnar = {"columns": NAMES[:2], "data": [[5.1, 3.5]]}
    assert bad_rows(columnar) == [("instances", "columns")] * 2
    assert messages(columnar) == [
        "missing column 'petal_length_cm'",
        "missing column 'petal_width_cm'",
    ]


def test_missing_key_in_a_record_versus_a_null_value() -> None:
    lacking = {k: v for k, v in ROW.items() if k != "sepal_width_cm"}
    assert bad_rows([ROW, lacking]) == [("instances", 1, "sepal_width_cm")]
    assert messages([ROW, lacking]) == ["missing column 'sepal_width_cm'"]
    assert messages([{**ROW, "sepal_width_cm": None}]) == [
        "column 'sepal_width_cm' cannot be missing for this model"
        " (it had no missing values in training)"
    ]


BEYOND_FLOAT32 = (
    "expected a number between -3.4028235e+38 and 3.4028235e+38 (float32's range, "
    "which the models compute in), got "
)


@pytest.mark.parametrize(
    ("value", "msg"),
    [
        ("abc", "expected a number, got 'abc'"),
        (True, "expected a number, got True"),
        ([1.0], "expected a number, got [1.0]"),
        (math.nan, "expected a finite number, got nan"),
        (math.inf, "expected a finite number, got inf"),
        (-math.inf, "expected a finite number, got -inf"),
        (10**400, BEYOND_FLOAT32 + "100000000000000000...0000000000000000000"),
        (1e308, BEYOND_FLOAT32 + "1e+308"),
        (-3.5e38, BEYOND_FLOAT32 + "-3.5e+38"),
    ],
)
def test_bad_numbers(value: object, msg: str) -> None:
    records = [ROW, {**ROW, "petal_length_cm": value}]
    assert bad_rows(records) == [("instances", 1, "petal_length_cm")]
    assert messages(records) == [msg]


def test_every_problem_is_reported_in_row_order_and_capped() -> None:
    records = [{**ROW, "sepal_length_cm": "x", "petal_width_cm": None}, [], {"petal_length_cm": 1}]
    assert bad_rows(records) == [
        ("instances", 0, "sepal_length_cm"),
        ("instances", 0, "petal_width_cm"),
        ("instances", 1),
        ("instances", 2, "sepal_length_cm"),
        ("instances", 2, "sepal_width_cm"),
        ("instances", 2, "petal_width_cm"),
    ]
    with pytest.raises(PredictionInputError) as exc:
        checked_frame(IRIS, [{**ROW, "sepal_width_cm": "x", "petal_width_cm": "y"}] * 40)
    assert len(exc.value.problems) == MAX_PROBLEMS
    assert [p.loc for p in exc.value.problems[:3]] == [
        ("instances", 0, "sepal_width_cm"),
        ("instances", 0, "petal_width_cm"),
        ("instances", 1, "sepal_width_cm"),
    ]
    assert exc.value.detail == f"80 problems in the instances (first {MAX_PROBLEMS} shown)"


# --- missing values and column types ----------------------------------------------------


@cache
def iris_with_gaps() -> Model:
    X, y = dataset("iris")
    X = X.copy()
    X.loc[X.index % 7 == 0, "petal_width_cm"] = np.nan
    return fit({"kind": "random_forest", "params": {"n_estimators": 5}}, "classification", X, y)


def test_missing_value_allowed_where_training_had_missing_values() -> None:
    pipeline, signature, X = iris_with_gaps()
    records = [{k: (None if pd.isna(v) else v) for k, v in r.items()} for r in X.to_dict("records")]
    frame, _ = checked_frame(signature, records)
    pd.testing.assert_frame_equal(frame, X)
    assert (
        predict(pipeline, signature, frame, PredictOptions()).predictions
        == pipeline.predict(X).tolist()
    )
    assert bad_rows([{**records[1], "sepal_length_cm": None}], signature) == [
        ("instances", 0, "sepal_length_cm")
    ]


@cache
def mixed_model() -> Model:
    rng = np.random.default_rng(0)
    n = 120
    X = pd.DataFrame(
        {
            "age": pd.Series(rng.integers(18, 80, n), dtype="int64"),
            "income": rng.normal(50, 10, n),
            "member": pd.Series(rng.random(n) < 0.5, dtype=object),
            "city": pd.Series(rng.choice(["oslo", "rome", "lima"], n), dtype=object),
        }
    )
    y = np.where((X["age"] > 40) ^ (X["city"] == "rome").to_numpy(), "yes", "no").astype(object)
    return fit({"kind": "random_forest", "params": {"n_estimators": 8}}, "classification", X, y)


def test_mixed_columns_are_typed_as_in_training() -> None:
    pipeline, signature, X = mixed_model()
    assert [f.dtype for f in signature.features] == ["int64", "float64", "bool", "string"]
    frame, _ = checked_frame(signature, X.to_dict(orient="records"))
    pd.testing.assert_frame_equal(frame, X)
    assert (
        predict(pipeline, signature, frame, PredictOptions()).predictions
        == pipeline.predict(X).tolist()
    )


def test_mixed_columns_missing_values_and_wrong_types() -> None:
    pipeline, signature, _ = mixed_model()
    good = {"age": 30, "income": 2, "member": True, "city": "oslo"}
    frame, _ = checked_frame(signature, [good, {**good, "member": None, "city": None, "age": 31.5}])
    assert frame["age"].dtype == np.float64 and frame["income"].dtype == np.float64
    assert frame["member"].tolist()[0] is True and math.isnan(frame["member"][1])
    assert frame["city"].dtype == object and math.isnan(frame["city"][1])
    # Categories may be missing (the one-hot encoder ignores them); the pipeline takes the row.
    result = predict(pipeline, signature, frame, PredictOptions(return_votes=True))
    assert result.predictions == pipeline.predict(frame).tolist()
    bad = [{**good, "age": "30", "income": False, "member": "yes", "city": 5}]
    with pytest.raises(PredictionInputError) as exc:
        checked_frame(signature, bad)
    assert [p.msg for p in exc.value.problems] == [
        "expected a number, got '30'",
        "expected a number, got False",
        "expected a boolean, got 'yes'",
        "expected a string, got 5",
    ]


def test_int_column_stays_int64_when_complete() -> None:
    _, signature, _ = mixed_model()
    good = {"age": 30, "income": 2, "member": False, "city": "oslo"}
    frame, _ = checked_frame(signature, [good])
    assert frame.dtypes.tolist() == [np.int64, np.float64, object, object]


# --- categories not seen in training ----------------------------------------------------


def test_known_categories_are_the_encoders_as_json_values() -> None:
    _, signature, _ = mixed_model()
    assert signature.categories == {"member": (False, True), "city": ("lima", "oslo", "rome")}
    assert {type(v) for v in (signature.categories or {})["member"]} == {bool}
    assert model("forest")[1].categories == {}  # numbers only: nothing to look at


def test_unseen_categories_are_warned_of_by_column_row_and_value() -> None:
    pipeline, signature, _ = mixed_model()
    good = {"age": 30, "income": 2.0, "member": True, "city": "oslo"}
    rows = [{**good, "city": "paris"}, good, {**good, "city": None}, {**good, "city": "Oslo"}]
    frame, warnings = checked_frame(signature, [*rows, {**good, "id": 1}])
    assert warnings == [
        "extra columns ignored: id",
        "column 'city': 2 rows have categories not seen in training ('paris' at row 0, "
        "'Oslo' at row 3); they are encoded as unknown",
    ]
    columnar = {"columns": list(good), "data": [list(r.values()) for r in rows]}
    assert check_rows(signature, columnar)[1] == warnings[1:]
    # The prediction stands: the pipeline's own answer for the same rows.
    assert predict(pipeline, signature, frame, PredictOptions()).predictions == (
        pipeline.predict(frame).tolist()
    )


def test_seen_categories_and_missing_cells_give_no_warning() -> None:
    _, signature, X = mixed_model()
    good = {"age": 30, "income": 2.0, "member": None, "city": None}
    assert checked_frame(signature, [*X.to_dict(orient="records"), good])[1] == []


def test_unseen_category_warnings_name_the_first_rows_and_count_the_rest() -> None:
    _, signature, _ = mixed_model()
    good = {"age": 30, "income": 2.0, "member": True, "city": "oslo"}
    rows = [{**good, "city": f"town {i}"} for i in range(12)] + [{**good, "city": "x" * 50}]
    _, [warning] = checked_frame(signature, rows)
    shown = ", ".join(f"'town {i}' at row {i}" for i in range(10))
    assert warning == (
        f"column 'city': 13 rows have categories not seen in training ({shown}, and 3 more "
        "rows); they are encoded as unknown"
    )
    _, [one] = checked_frame(signature, [good, {**good, "city": "x" * 50}])
    assert one == (
        f"column 'city': 1 row has a category not seen in training ('{'x' * 17}..."
        f"{'x' * 18}' at row 1); "
        "it is encoded as unknown"
    )


def test_a_boolean_value_training_never_had_is_an_unseen_category() -> None:
    X = mixed_model()[2].assign(member=pd.Series([True] * 120, dtype=object))
    y = np.where(X["age"] > 40, "yes", "no").astype(object)
    spec = {"kind": "random_forest", "params": {"n_estimators": 3}}
    _, signature, _ = fit(spec, "classification", X, y)
    assert signature.categories is not None and signature.categories["member"] == (True,)
    row = {"age": 30, "income": 2.0, "member": False, "city": "oslo"}
    assert checked_frame(signature, [row])[1] == [
        "column 'member': 1 row has a category not seen in training (False at row 0); "
        "it is encoded as unknown"
    ]


def test_signature_round_trip_keeps_categories_and_old_signatures_still_load() -> None:
    pipeline, signature, _ = mixed_model()
    stored = json.loads(json.dumps(signature.as_dict()))
    assert stored["categories"] == {"member": [False, True], "city": ["lima", "oslo", "rome"]}
    assert ModelSignature.from_dict(stored) == signature
    # Signatures stored before categories were recorded: no key at all.
    old = ModelSignature.from_dict({k: v for k, v in stored.items() if k != "categories"})
    assert old.categories is None
    rows = [{"age": 30, "income": 2.0, "member": True, "city": "paris"}]
    frame, warnings = checked_frame(old, rows)
    assert warnings == []
    assert predict(pipeline, old, frame, PredictOptions()).predictions == (
        pipeline.predict(frame).tolist()
    )


# --- the response -----------------------------------------------------------------------


def test_as_dict_holds_only_what_was_asked() -> None:
    assert Prediction(predictions=["a"]).as_dict() == {"predictions": ["a"]}
    full = Prediction(["a"], np.array([[1.0]]), [{"a": 1}], np.array([1.0]), None)
    assert written(full).document == {
        "predictions": ["a"],
        "probabilities": [[1.0]],
        "votes": [{"a": 1}],
        "agreement": [1.0],
    }
    # Warnings come with the checked columns; the service writes them beside the answers.
    assert check_rows(IRIS, [{**ROW, "x": 1}]).warnings == ["extra columns ignored: x"]


def test_every_per_row_list_has_one_entry_per_row_in_order() -> None:
    pipeline, signature, X = model("forest")
    rows = X.iloc[[5, 0, 170, 5]]
    result = predict(
        pipeline,
        signature,
        rows.reset_index(drop=True),
        PredictOptions(return_proba=True, return_votes=True),
    )
    assert result.predictions == pipeline.predict(rows).tolist()
    assert (
        len(result.probabilities or [])
        == len(result.votes or [])
        == len(result.agreement or [])
        == 4
    )
    assert result.votes is not None and result.votes[0] == result.votes[3]
