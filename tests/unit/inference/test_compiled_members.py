"""Voting, stacking and bagging-family ensembles with their tree members compiled.

Every composite kind, both tasks, tree members of every kind mixed with other members:
labels identical and probabilities or values within 1e-9 of the stored pipeline, on the
training rows, on rows exactly on the tree members' split thresholds (found here from the
fitted members themselves, bagging subsets mapped back to the original columns,
independently of the module's own probes) and on rows whose class probabilities tie.  A
composite that fails the fidelity check, or has no tree member, is served by scikit-learn
with the reason; the verdict survives storing, rebuilding and pickling.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    BaggingClassifier,
    BaggingRegressor,
    ExtraTreesClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
    StackingClassifier,
    StackingRegressor,
    VotingClassifier,
    VotingRegressor,
)
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC, SVR
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor, ExtraTreeClassifier

from ensembles.data import TrainingData
from ensembles.inference import (
    ENGINE,
    SKLEARN,
    CompiledComposite,
    FidelityReport,
    Servable,
    compile_model,
    inference_verdict,
    nodes,
    prepare,
    rebuild,
)
from ensembles.inference.composite import quiet_sklearn
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import frame, training_data

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
RS = 5
TOL = 1e-9
NO_EVAL = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)


def member(name: str, kind: str, **params: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "params": params}


LR = member("lr", "logistic_regression", max_iter=500)
NB = member("nb", "gaussian_nb")
RF = member("rf", "random_forest", n_estimators=8)
ET = member("et", "extra_trees", n_estimators=6)
GB = member("gb", "gradient_boosting", n_estimators=6)
HGB = member("hgb", "hist_gradient_boosting", max_iter=6)
DT = member("dt", "decision_tree", max_depth=5)
KNN = member("knn", "knn")
SVM = member("svm", "svm")
LIN = member("lin", "linear_regression")
RIDGE = member("ridge", "ridge")
RF_R = member("rf", "random_forest", n_estimators=8)
DT_R = member("dt", "decision_tree", max_depth=6)

# id -> (dataset, spec): every composite kind, with tree members of every kind.
CLASSIFIERS: dict[str, tuple[str, dict[str, Any]]] = {
    "soft_voting": (
        "breast_cancer",
        {"kind": "voting", "params": {"voting": "soft"}, "estimators": [LR, RF, NB]},
    ),
    "soft_voting_weighted": (
        "wine",
        {
            "kind": "voting",
            "params": {"voting": "soft", "weights": [1, 2, 0.5, 1]},
            "estimators": [LR, ET, DT, GB],
        },
    ),
    "hard_voting": (
        "iris",
        {"kind": "voting", "params": {"voting": "hard"}, "estimators": [DT, KNN, HGB]},
    ),
    "hard_voting_weighted": (
        "wine",
        {
            "kind": "voting",
            "params": {"voting": "hard", "weights": [2, 1, 1]},
            "estimators": [RF, SVM, NB],
        },
    ),
    "stacking_binary": (
        "breast_cancer",
        {"kind": "stacking", "params": {"cv": 3}, "estimators": [LR, RF, NB]},
    ),
    "stacking_passthrough_multiclass": (
        "iris",
        {"kind": "stacking", "params": {"cv": 3, "passthrough": True}, "estimators": [DT, GB, NB]},
    ),
    "stacking_decision_function": (
        "wine",
        {
            "kind": "stacking",
            "params": {"cv": 3, "stack_method": "decision_function"},
            "estimators": [GB, HGB, LR],
        },
    ),
    "stacking_predict_nb_final": (
        "iris",
        {
            "kind": "stacking",
            "params": {"cv": 3, "stack_method": "predict"},
            "estimators": [ET, DT, KNN],
            "final_estimator": {"kind": "gaussian_nb"},
        },
    ),
    "bagging": ("breast_cancer", {"kind": "bagging", "params": {"n_estimators": 12}}),
    "pasting": ("wine", {"kind": "pasting", "params": {"n_estimators": 10, "max_features": 0.7}}),
    "random_subspace_gb": (
        "wine",
        {
            "kind": "random_subspace",
            "params": {"n_estimators": 3},
            "estimator": {"kind": "gradient_boosting", "params": {"n_estimators": 5}},
        },
    ),
    "random_patches": (
        "iris",
        {"kind": "random_patches", "params": {"n_estimators": 12, "bootstrap_features": True}},
    ),
    "bagging_hgb": (
        "iris",
        {
            "kind": "bagging",
            "params": {"n_estimators": 3, "max_samples": 0.4},
            "estimator": {"kind": "hist_gradient_boosting", "params": {"max_iter": 5}},
        },
    ),
    "nested_voting_of_bagged_svm_and_forest": (
        "breast_cancer",
        {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [
                {
                    "name": "bag",
                    "kind": "bagging",
                    "params": {"n_estimators": 3},
                    "estimator": {"kind": "svm"},
                },
                RF,
            ],
        },
    ),
}
REGRESSORS: dict[str, tuple[str, dict[str, Any]]] = {
    "voting_regressor": (
        "diabetes",
        {"kind": "voting", "params": {"weights": [1, 2, 1, 1]}, "estimators": [LIN, RF_R, GB, KNN]},
    ),
    "stacking_regressor": (
        "diabetes",
        {"kind": "stacking", "params": {"cv": 3}, "estimators": [DT_R, HGB, RIDGE]},
    ),
    "stacking_regressor_passthrough": (
        "diabetes",
        {"kind": "stacking", "params": {"cv": 3, "passthrough": True}, "estimators": [ET, LIN]},
    ),
    "bagging_regressor": ("diabetes", {"kind": "bagging", "params": {"n_estimators": 12}}),
    "pasting_regressor": ("diabetes", {"kind": "pasting", "params": {"n_estimators": 8}}),
    "random_subspace_regressor": (
        "diabetes",
        {"kind": "random_subspace", "params": {"n_estimators": 8}},
    ),
    "random_patches_regressor_of_forests": (
        "diabetes",
        {
            "kind": "random_patches",
            "params": {"n_estimators": 3},
            "estimator": {"kind": "random_forest", "params": {"n_estimators": 4}},
        },
    ),
}
CASES = {**CLASSIFIERS, **REGRESSORS}


@cache
def fitted(case: str) -> tuple[FittedModel, TrainingData]:
    name, raw = CASES[case]
    data = training_data(name)
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    return train(data, spec, NO_EVAL, RS), data


def served(model: FittedModel, engine: CompiledComposite) -> Servable:
    """The version's servable with ``engine`` as its compiled engine."""
    servable = prepare(model.pipeline, model.signature, None)
    return replace(servable, engines=(engine, *servable.engines))


def preprocessed(pipeline: Pipeline, X: pd.DataFrame) -> NDArray[Any]:
    return np.asarray(pipeline[:-1].transform(X))


def verdict(model: FittedModel) -> dict[str, Any]:
    """The version's ``inference`` metadata, as the worker records it after training."""
    return inference_verdict(model.pipeline, model.signature.task, model.train_rows, RS)


@cache
def compiled(case: str) -> tuple[CompiledComposite | None, FidelityReport]:
    model, data = fitted(case)
    engine, report = compile_model(model.pipeline, data.task, data.X, calibrate=False)
    assert engine is None or isinstance(engine, CompiledComposite)
    return engine, report


def ok(case: str) -> CompiledComposite:
    engine, report = compiled(case)
    assert report.ok, report.reason
    assert engine is not None
    return engine


def assert_same(engine: CompiledComposite, estimator: BaseEstimator, X: NDArray[Any]) -> None:
    if engine.task == "regression":
        np.testing.assert_allclose(engine.predict(X), estimator.predict(X), rtol=0, atol=TOL)
        return
    labels, proba = engine.predict_with_proba(X)
    np.testing.assert_array_equal(labels, estimator.predict(X))
    if hasattr(estimator, "predict_proba"):
        assert proba is not None
        np.testing.assert_allclose(proba, estimator.predict_proba(X), rtol=0, atol=TOL)
    else:
        assert proba is None


def deferred(engine: CompiledComposite, Xt: NDArray[Any]) -> float:
    """The share of rows the compiled path leaves to scikit-learn (too close to call)."""
    with quiet_sklearn():
        if engine.task == "regression":
            _, unsure = engine.root.values(Xt)
        else:
            _, _, unsure = engine.root.both(Xt)
    return float(unsure.mean())


# --- rows on the tree members' split thresholds -----------------------------------------


def tree_models(estimator: BaseEstimator, columns: NDArray[np.intp]) -> list[tuple[Any, Any]]:
    """(tree model, the original column of each of its columns) for every tree model inside."""
    if isinstance(
        estimator, VotingClassifier | VotingRegressor | StackingClassifier | StackingRegressor
    ):
        return [t for m in estimator.estimators_ for t in tree_models(m, columns)]
    if isinstance(estimator, BaggingClassifier | BaggingRegressor):
        pairs = zip(estimator.estimators_, estimator.estimators_features_, strict=True)
        return [t for m, f in pairs for t in tree_models(m, columns[np.asarray(f)])]
    if hasattr(estimator, "tree_") or hasattr(estimator, "_predictors"):
        return [(estimator, columns)]
    fitted_members = np.asarray(getattr(estimator, "estimators_", []), dtype=object).ravel()
    if len(fitted_members) and hasattr(fitted_members[0], "tree_"):
        return [(estimator, columns)]
    return []


def threshold_rows(estimator: BaseEstimator, Xt: NDArray[Any], max_trees: int = 12) -> NDArray[Any]:
    """Rows that reach split nodes of every tree member with the split column exactly on the
    node's threshold (and on the nearest float32 / float64 values either side)."""
    rng = np.random.default_rng(RS)
    rows: list[NDArray[Any]] = []

    def put(base: NDArray[Any], column: int, values: list[float]) -> None:
        for value in values:
            row = base.copy()
            row[column] = value
            rows.append(row)

    for model, columns in tree_models(estimator, np.arange(Xt.shape[1])):
        for stage in list(getattr(model, "_predictors", None) or [])[:max_trees]:
            for predictor in stage:  # histogram boosting: its own nodes, float64 compares
                nodes_ = predictor.nodes
                for b in rng.integers(0, len(Xt), 2):
                    i = 0
                    while not nodes_["is_leaf"][i]:
                        f, t = int(nodes_["feature_idx"][i]), float(nodes_["num_threshold"][i])
                        put(
                            Xt[b],
                            int(columns[f]),
                            [t, np.nextafter(t, -np.inf), np.nextafter(t, np.inf)],
                        )
                        left = Xt[b, columns[f]] <= t
                        i = int(nodes_["left"][i] if left else nodes_["right"][i])
        trees = (
            [model]
            if hasattr(model, "tree_")
            else list(np.asarray(getattr(model, "estimators_", []), dtype=object).ravel())
        )
        for tree in trees[:max_trees]:
            bases = rng.integers(0, len(Xt), 2)
            path = tree.decision_path(Xt[bases][:, columns])
            for k, b in enumerate(bases):
                for node in path.indices[path.indptr[k] : path.indptr[k + 1]]:
                    f = int(tree.tree_.feature[node])
                    if f < 0:
                        continue
                    t = float(tree.tree_.threshold[node])
                    t32 = np.float32(t)
                    near = [np.nextafter(t32, np.float32(-np.inf)), t32, np.nextafter(t32, np.inf)]
                    put(Xt[b], int(columns[f]), [t, *(float(v) for v in near)])
    return np.array(rows)


# --- every composite kind, both tasks ---------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_the_compiled_composite_answers_as_the_pipeline(case: str) -> None:
    model, data = fitted(case)
    engine, report = compiled(case)
    assert report.ok and report.engine == ENGINE, report.reason
    assert engine is not None and engine.name == ENGINE
    assert report.max_abs_diff <= TOL and report.n_rows_checked > len(data.X)
    assert any(m["engine"] == ENGINE for m in report.members)  # a tree member is compiled
    X = data.X
    classifier = data.task == "classification"
    answer = served(model, replace(engine, max_rows=len(X))).answer(X, with_proba=classifier)
    assert answer.engine == ENGINE
    assert deferred(engine, preprocessed(model.pipeline, X)) < 0.05  # compiled answers them
    if classifier:
        np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(X))
        if hasattr(model.pipeline, "predict_proba"):
            assert answer.probabilities is not None
            expected = model.pipeline.predict_proba(X)
            np.testing.assert_allclose(answer.probabilities, expected, rtol=0, atol=TOL)
    else:
        np.testing.assert_allclose(answer.predictions, model.pipeline.predict(X), rtol=0, atol=TOL)


@pytest.mark.parametrize("case", list(CASES))
def test_the_compiled_composite_answers_as_sklearn_on_split_thresholds(case: str) -> None:
    model, data = fitted(case)
    engine, estimator = ok(case), model.pipeline[-1]
    Xt = np.asarray(model.pipeline[:-1].transform(data.X), dtype=np.float64)
    rows = threshold_rows(estimator, Xt)
    assert len(rows) > 100
    assert_same(engine, estimator, rows)


def test_members_are_recorded_with_their_engines() -> None:
    _, report = compiled("soft_voting")
    assert [(m["name"], m["kind"], m["engine"]) for m in report.members] == [
        ("lr", "LogisticRegression", "numpy"),
        ("rf", "RandomForestClassifier", ENGINE),
        ("nb", "GaussianNB", "numpy"),
    ]
    _, bagged = compiled("bagging")  # all its trees in one treelite forest
    assert [(m["name"], m["engine"]) for m in bagged.members] == [("member_0..member_11", ENGINE)]
    _, nested = compiled("nested_voting_of_bagged_svm_and_forest")
    names = {m["name"]: m["engine"] for m in nested.members}
    assert names == {"bag.member_0..member_2": SKLEARN, "rf": ENGINE}
    _, stacked = compiled("stacking_binary")
    assert stacked.members[-1] == {
        "name": "final_estimator",
        "kind": "LogisticRegression",
        "engine": "numpy",
    }
    stored = json.loads(json.dumps(stacked.as_dict()))
    assert FidelityReport.from_dict(stored) == stacked
    older = {k: v for k, v in stored.items() if k != "members"}  # a record made before
    assert FidelityReport.from_dict(older).members == ()


def test_only_composites_without_sklearn_members_count_as_native() -> None:
    """Native composites may be answered on the service's event loop (tens of us)."""
    soft, _ = compiled("soft_voting")
    nested, _ = compiled("nested_voting_of_bagged_svm_and_forest")
    assert soft is not None and soft.native
    assert nested is not None and not nested.native  # the bagged SVMs are scikit-learn's


# --- ties -------------------------------------------------------------------------------


@pytest.fixture(params=[0.0, 1e-12, -1e-12], ids=["exact", "last-bits-up", "last-bits-down"])
def nudged(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> float:
    """The engine's sums may differ from scikit-learn's in the last bits: nudge the last
    column of every compiled member's scores by far less than the tolerance, which would
    flip every tie if ties were decided on the compiled numbers."""
    nudge = float(request.param)
    original = nodes.TreesNode._scores

    def scores(self: nodes.TreesNode, X: NDArray[np.float64]) -> NDArray[np.float64]:
        out = original(self, X)
        out[:, -1] += nudge
        return out

    monkeypatch.setattr(nodes.TreesNode, "_scores", scores)
    return nudge


def _two_pure_trees(kind: str) -> dict[str, Any]:
    """Two fully grown trees that disagree now and then: probabilities 0.5 / 0.5 then."""
    if kind == "voting":
        trees = [
            member("a", "decision_tree", max_features=1),
            member("b", "decision_tree", max_features=2),
        ]
        return {"kind": "voting", "params": {"voting": "soft"}, "estimators": [*trees, LR]}
    return {"kind": "bagging", "params": {"n_estimators": 2}}  # on two bootstrap samples


def _fitted_and_compiled(
    data: TrainingData, raw: dict[str, Any]
) -> tuple[FittedModel, CompiledComposite]:
    """The trained model (no verdict recorded) and its compiled engine, which must exist."""
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    model = train(data, spec, NO_EVAL, RS)
    engine, report = compile_model(model.pipeline, "classification", data.X, calibrate=False)
    assert isinstance(engine, CompiledComposite), report.reason
    return model, engine


def _resampled(data: TrainingData, n: int) -> pd.DataFrame:
    """n rows whose every cell is drawn from its column: new combinations, known values."""
    rng = np.random.default_rng(RS)
    return data.X.apply(lambda column: column.to_numpy()[rng.integers(0, len(column), n)])


@pytest.mark.parametrize("kind", ["voting", "bagging"])
@pytest.mark.parametrize("name", ["breast_cancer", "iris"], ids=["binary", "multiclass"])
def test_tied_probabilities_get_sklearns_labels(kind: str, name: str, nudged: float) -> None:
    data = training_data(name)
    raw = _two_pure_trees(kind)
    if kind == "voting":  # lr's vote would break the ties: give it no weight
        raw["params"]["weights"] = [1, 1, 0]
    model, engine = _fitted_and_compiled(data, raw)
    X = _resampled(data, 600)
    expected_proba = model.pipeline.predict_proba(X)
    top = np.sort(expected_proba, axis=1)
    tied = top[:, -1] == top[:, -2]
    assert tied.sum() >= 10
    labels, proba = engine.predict_with_proba(preprocessed(model.pipeline, X))
    np.testing.assert_array_equal(labels, model.pipeline.predict(X))
    assert proba is not None
    np.testing.assert_allclose(proba, expected_proba, rtol=0, atol=TOL)


def test_hard_votes_that_tie_go_to_the_first_class_as_in_sklearn(nudged: float) -> None:
    data = training_data("wine")
    trees = [member(n, "decision_tree", max_features=f) for n, f in (("a", 1), ("b", 2))]
    raw = {"kind": "voting", "params": {"voting": "hard"}, "estimators": trees}
    model, engine = _fitted_and_compiled(data, raw)
    X = _resampled(data, 400)
    Xt = preprocessed(model.pipeline, X)
    votes = np.array([m.predict(Xt) for m in model.pipeline[-1].estimators_])
    assert (votes[0] != votes[1]).sum() >= 10  # one vote each: a tie
    labels, proba = engine.predict_with_proba(Xt)
    assert proba is None  # hard voting gives no probabilities
    np.testing.assert_array_equal(labels, model.pipeline.predict(X))


# --- refused: served by scikit-learn, with the reason -----------------------------------


def _perturbed(delta: float) -> Any:
    original = nodes.TreesNode._scores

    def scores(self: nodes.TreesNode, X: NDArray[np.float64]) -> NDArray[np.float64]:
        return original(self, X) + delta

    return scores


@pytest.mark.parametrize(
    ("case", "delta", "reason"),
    [
        ("soft_voting", 1e-7, "probabilities differ by up to"),
        ("stacking_decision_function", 50.0, "labels differ on"),
        ("bagging_regressor", 2e-9, "predicted values differ by up to 2e-09"),
    ],
    ids=["probabilities-off", "labels-off", "values-off"],
)
def test_a_composite_failing_the_check_is_served_by_sklearn_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, case: str, delta: float, reason: str
) -> None:
    model, data = fitted(case)
    monkeypatch.setattr(nodes.TreesNode, "_scores", _perturbed(delta))
    engine, report = compile_model(model.pipeline, data.task, data.X, calibrate=False)
    assert engine is None and not report.ok and report.engine is None
    assert report.reason is not None and reason in report.reason
    assert any(m["engine"] == ENGINE for m in report.members)  # what would have been compiled
    stored = json.loads(json.dumps(report.as_dict()))
    rebuilt, again = rebuild(model.pipeline, data.task, stored)
    assert rebuilt is None and again.reason == report.reason
    servable = prepare(model.pipeline, model.signature, {**stored, "engine": SKLEARN})
    assert [e.name for e in servable.engines] == [SKLEARN]
    assert servable.engine_for(1).name == SKLEARN
    answer = servable.answer(data.X.head(5))
    assert answer.engine == SKLEARN
    np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(data.X.head(5)))


def test_a_numpy_member_that_differs_is_left_to_sklearn_and_stays_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, data = fitted("soft_voting")
    original = nodes.LogisticNode.decision

    def off(self: nodes.LogisticNode, X: NDArray[np.float64]) -> Any:
        scores, unsure = original(self, X)
        return scores + 1e-6, unsure

    monkeypatch.setattr(nodes.LogisticNode, "decision", off)
    engine, report = compile_model(model.pipeline, "classification", data.X, calibrate=False)
    assert engine is not None and report.ok, report.reason  # the forest is still compiled
    lr = report.members[0]
    assert lr["name"] == "lr" and lr["engine"] == SKLEARN
    assert "probabilities differ" in lr["reason"]
    assert_same(engine, model.pipeline[-1], preprocessed(model.pipeline, data.X))
    rebuilt, _ = rebuild(model.pipeline, "classification", json.loads(json.dumps(report.as_dict())))
    assert isinstance(rebuilt, CompiledComposite)
    assert isinstance(rebuilt.root, nodes.VotingNode)
    assert isinstance(rebuilt.root.members[0], nodes.SklearnNode)  # as recorded
    assert isinstance(rebuilt.root.members[2], nodes.NaiveBayesNode)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (
            {"kind": "voting", "params": {"voting": "soft"}, "estimators": [LR, NB]},
            "VotingClassifier is not a tree ensemble the compiled engine supports, nor is any of "
            "its members (lr: LogisticRegression, nb: GaussianNB)",
        ),
        (
            {
                "kind": "stacking",
                "params": {"cv": 3},
                "estimators": [LR, RF],
                "final_estimator": {"kind": "decision_tree"},
            },
            "its final estimator DecisionTreeClassifier could change its answer",
        ),
    ],
    ids=["no-tree-member", "discontinuous-final-estimator"],
)
def test_composites_without_a_compiled_member_say_why(raw: dict[str, Any], reason: str) -> None:
    data = training_data("wine")
    model = train(data, resolve_ensemble(parse_estimator_spec(raw), data.task), NO_EVAL, RS)
    inference = verdict(model)
    assert inference["ok"] is False
    assert inference["engine"] == SKLEARN and reason in inference["reason"]
    servable = prepare(model.pipeline, model.signature, inference)
    assert [e.name for e in servable.engines] == [SKLEARN]
    np.testing.assert_array_equal(
        servable.answer(data.X).predictions, model.pipeline.predict(data.X)
    )


# --- hand-built scikit-learn ensembles --------------------------------------------------


def _passthrough(estimator: BaseEstimator, X: pd.DataFrame, y: Any) -> Pipeline:
    pre = ColumnTransformer([("numeric", "passthrough", list(X.columns))])
    return Pipeline([("preprocess", pre), ("ensemble", estimator)]).fit(X, y)


def _xy(name: str, strings: bool = False) -> tuple[pd.DataFrame, NDArray[Any]]:
    f = frame(name)
    y = f["target"].to_numpy()
    if strings:  # labels the ensembles encode: answers must be decoded as scikit-learn does
        y = np.array(["setosa", "versicolor", "virginica", "other"])[y % 4]
    return f.drop(columns="target"), y


HAND_BUILT: dict[str, tuple[str, bool, BaseEstimator]] = {
    "bagging_extra_trees_bootstrap_features": (
        "wine",
        True,
        BaggingClassifier(
            ExtraTreeClassifier(random_state=RS),
            n_estimators=10,
            max_features=0.6,
            bootstrap_features=True,
            random_state=RS,
        ),
    ),
    "bagging_weighted_trees_missing_classes": (
        "iris",
        True,
        BaggingClassifier(
            DecisionTreeClassifier(class_weight="balanced", random_state=RS),
            n_estimators=8,
            max_samples=6,
            random_state=RS,
        ),
    ),
    "voting_hgb_svc_et": (
        "breast_cancer",
        False,
        VotingClassifier(
            [
                ("hgb", HistGradientBoostingClassifier(max_iter=5, random_state=RS)),
                ("svc", CalibratedClassifierCV(SVC(random_state=RS), ensemble=False)),
                ("et", ExtraTreesClassifier(n_estimators=5, random_state=RS)),
            ],
            voting="soft",
        ),
    ),
    "stacking_of_a_voting_and_a_bagging": (
        "wine",
        True,
        StackingClassifier(
            [
                (
                    "vote",
                    VotingClassifier(
                        [
                            ("rf", RandomForestClassifier(n_estimators=4, random_state=RS)),
                            ("nb", GaussianNB()),
                        ],
                        voting="soft",
                    ),
                ),
                (
                    "bag",
                    BaggingClassifier(
                        DecisionTreeClassifier(random_state=RS), n_estimators=4, random_state=RS
                    ),
                ),
            ],
            final_estimator=LogisticRegression(max_iter=500),
            cv=3,
        ),
    ),
    "voting_regressor_of_a_bagging": (
        "diabetes",
        False,
        VotingRegressor(
            [
                (
                    "bag",
                    BaggingRegressor(
                        GradientBoostingRegressor(n_estimators=4, random_state=RS),
                        n_estimators=3,
                        random_state=RS,
                    ),
                ),
                ("tree", DecisionTreeRegressor(max_depth=4, random_state=RS)),
                ("ridge", Ridge()),
            ]
        ),
    ),
    "stacking_regressor_svr_final": (
        "diabetes",
        False,
        StackingRegressor(
            [("rf", RandomForestRegressor(n_estimators=4, random_state=RS)), ("ridge", Ridge())],
            final_estimator=SVR(),
            cv=3,
        ),
    ),
}


@pytest.mark.parametrize("case", list(HAND_BUILT))
def test_hand_built_ensembles_are_compiled_exactly(case: str) -> None:
    name, strings, estimator = HAND_BUILT[case]
    X, y = _xy(name, strings)
    pipeline = _passthrough(estimator, X, y)
    task = "regression" if name == "diabetes" else "classification"
    engine, report = compile_model(pipeline, task, X, calibrate=False)
    assert isinstance(engine, CompiledComposite) and report.ok, report.reason
    Xt = preprocessed(pipeline, X)
    assert_same(engine, pipeline[-1], Xt)
    assert_same(engine, pipeline[-1], threshold_rows(pipeline[-1], Xt))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_rows_sklearn_refuses_are_refused_the_same_way() -> None:
    model, data = fitted("soft_voting")
    engine = ok("soft_voting")
    Xt = preprocessed(model.pipeline, data.X.iloc[:3]).copy()
    Xt[1, 0] = 1e300  # beyond float32: the forest member refuses it
    with pytest.raises(ValueError) as theirs:
        model.pipeline[-1].predict(Xt)
    with pytest.raises(ValueError) as ours:
        engine.predict(Xt)
    assert str(ours.value) == str(theirs.value)
    Xt[1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        engine.predict(Xt)
    with pytest.raises(ValueError, match="expects 30"):
        engine.predict(Xt[:, :5])


# --- serving and storing ----------------------------------------------------------------


@pytest.mark.parametrize("case", ["soft_voting", "stacking_binary", "bagging", "voting_regressor"])
def test_rebuilt_and_unpickled_composites_answer_the_same(case: str) -> None:
    model, data = fitted(case)
    engine, report = ok(case), compiled(case)[1]
    stored = json.loads(json.dumps(report.as_dict()))
    rebuilt, checked = rebuild(model.pipeline, data.task, stored)
    assert isinstance(rebuilt, CompiledComposite) and checked.ok, checked.reason
    assert checked.n_rows_checked > 0 and checked.members == report.members
    unpickled = pickle.loads(pickle.dumps(engine))
    Xt = preprocessed(model.pipeline, data.X)
    assert prepare(model.pipeline, model.signature, stored).passthrough is not None
    for other in (rebuilt, unpickled):
        assert other.max_rows == engine.max_rows and other.members == engine.members
        np.testing.assert_array_equal(other.predict(Xt), engine.predict(Xt))
        if data.task == "classification":
            np.testing.assert_array_equal(
                other.answer(Xt, with_proba=True).probabilities,
                engine.answer(Xt, with_proba=True).probabilities,
            )


def test_rebuilding_refuses_a_composite_that_no_longer_answers_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, _ = fitted("bagging")
    _, report = compiled("bagging")
    monkeypatch.setattr(nodes.TreesNode, "_scores", _perturbed(1e-6))  # e.g. after an upgrade
    rebuilt, checked = rebuild(model.pipeline, "classification", report.as_dict())
    assert rebuilt is None and not checked.ok
    assert checked.reason is not None and "probabilities differ" in checked.reason


@pytest.mark.parametrize("case", ["stacking_binary", "random_patches_regressor_of_forests"])
def test_the_verdict_records_the_composite_and_the_service_uses_it_for_small_requests(
    case: str,
) -> None:
    name, raw = CASES[case]
    data = training_data(name)
    model = train(data, resolve_ensemble(parse_estimator_spec(raw), data.task), NO_EVAL, RS)
    inference = verdict(model)
    assert inference["ok"] is True and inference["engine"] == ENGINE
    assert inference["crossover_rows"] >= 1 and inference["members"]
    servable = prepare(model.pipeline, model.signature, inference)
    compiled = servable.engines[0]
    assert isinstance(compiled, CompiledComposite)
    assert servable.engine_for(1).name == ENGINE
    X = data.X.head(5)
    columns = {c: X[c].to_numpy() for c in X.columns}
    classifier = data.task == "classification"
    answer = servable.answer(columns, with_proba=classifier)
    assert answer.engine == ENGINE
    if classifier:
        np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(X))
        np.testing.assert_allclose(
            answer.probabilities, model.pipeline.predict_proba(X), rtol=0, atol=TOL
        )
    else:
        np.testing.assert_allclose(answer.predictions, model.pipeline.predict(X), rtol=0, atol=TOL)
    big = compiled.max_rows + 1
    assert servable.engine_for(big).name == SKLEARN
