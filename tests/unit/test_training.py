"""Fidelity to scikit-learn called directly, OOB, parallel members, progress and cancel.

Every kind is trained for each task by ``tests/unit/test_kinds.py``.

The fidelity cases construct each scikit-learn estimator by hand (not through our
builders) with the parameters and seed the spec names, fit it on the same rows, and
demand exactly equal predictions, probabilities and OOB scores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import catboost
import lightgbm
import numpy as np
import pytest
import xgboost
from joblib import parallel_config
from sklearn import ensemble as E  # noqa: N812
from sklearn.base import BaseEstimator, clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.neural_network import MLPClassifier
from sklearn.svm import SVC, SVR
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from ensembles.catalog import ENSEMBLE_KINDS
from ensembles.errors import TrainingCancelledError
from ensembles.kinds import (
    EnsembleSelectionClassifier,
    EnsembleSelectionRegressor,
    PastingVotesClassifier,
    PastingVotesRegressor,
)
from ensembles.kinds.adaboost_mh import AdaBoostMHClassifier
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.cancel import CancelAfter
from tests.unit.datasets import training_data

RS = 7
NO_EVAL = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)


def fit(
    dataset: str, raw: dict[str, Any], evaluation: EvaluationSpec = NO_EVAL, **kw: Any
) -> FittedModel:
    data = training_data(dataset)
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    return train(data, spec, evaluation, RS, **kw)


# --- fidelity ------------------------------------------------------------------------

Maker = Callable[[], BaseEstimator]
FIDELITY: list[Any] = [
    (
        "voting",
        "classification",
        {
            "kind": "voting",
            "params": {"voting": "soft", "weights": [2, 1, 1]},
            "estimators": [
                {
                    "name": "lr",
                    "kind": "logistic_regression",
                    "params": {"C": 0.5, "max_iter": 2000},
                },
                {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 20}},
                {"name": "nb", "kind": "gaussian_nb"},
            ],
        },
        lambda: E.VotingClassifier(
            [
                ("lr", LogisticRegression(C=0.5, max_iter=2000, random_state=RS)),
                ("rf", E.RandomForestClassifier(n_estimators=20, random_state=RS)),
                ("nb", GaussianNB()),
            ],
            voting="soft",
            weights=[2, 1, 1],
        ),
    ),
    (
        "voting",
        "regression",
        {
            "kind": "voting",
            "estimators": [
                {"name": "lin", "kind": "linear_regression"},
                {"name": "knn", "kind": "knn", "params": {"n_neighbors": 7}},
                {"name": "svr", "kind": "svm", "params": {"C": 10.0}},
            ],
        },
        lambda: E.VotingRegressor(
            [("lin", LinearRegression()), ("knn", KNeighborsRegressor(7)), ("svr", SVR(C=10.0))]
        ),
    ),
    (
        "bagging",
        "classification",
        {"kind": "bagging", "params": {"n_estimators": 25, "max_features": 0.7}},
        lambda: E.BaggingClassifier(
            n_estimators=25, max_features=0.7, oob_score=True, random_state=RS
        ),
    ),
    (
        "bagging",
        "regression",
        {"kind": "bagging", "params": {"n_estimators": 25}, "estimator": {"kind": "knn"}},
        lambda: E.BaggingRegressor(
            KNeighborsRegressor(), n_estimators=25, oob_score=True, random_state=RS
        ),
    ),
    (
        "pasting",
        "classification",
        {"kind": "pasting", "params": {"n_estimators": 15, "max_samples": 0.6}},
        lambda: E.BaggingClassifier(
            n_estimators=15, max_samples=0.6, bootstrap=False, random_state=RS
        ),
    ),
    (
        "random_subspace",
        "regression",
        {"kind": "random_subspace", "params": {"n_estimators": 15}},
        lambda: E.BaggingRegressor(
            n_estimators=15, max_samples=1.0, max_features=0.5, bootstrap=False, random_state=RS
        ),
    ),
    (
        "random_patches",
        "classification",
        {"kind": "random_patches", "params": {"n_estimators": 15, "bootstrap": True}},
        lambda: E.BaggingClassifier(
            n_estimators=15,
            max_samples=0.5,
            max_features=0.5,
            bootstrap=True,
            oob_score=True,
            random_state=RS,
        ),
    ),
    (
        "adaboost",
        "classification",
        {"kind": "adaboost", "params": {"n_estimators": 30, "learning_rate": 0.5}},
        lambda: E.AdaBoostClassifier(
            DecisionTreeClassifier(max_depth=1), n_estimators=30, learning_rate=0.5, random_state=RS
        ),
    ),
    (
        "adaboost",
        "regression",
        {"kind": "adaboost", "params": {"n_estimators": 20, "loss": "square"}},
        lambda: E.AdaBoostRegressor(
            DecisionTreeRegressor(max_depth=3), n_estimators=20, loss="square", random_state=RS
        ),
    ),
    (
        "gradient_boosting",
        "classification",
        {
            "kind": "gradient_boosting",
            "params": {"n_estimators": 40, "subsample": 0.7, "max_depth": 2},
        },
        lambda: E.GradientBoostingClassifier(
            n_estimators=40, subsample=0.7, max_depth=2, random_state=RS
        ),
    ),
    (
        "gradient_boosting",
        "regression",
        {"kind": "gradient_boosting", "params": {"n_estimators": 40, "loss": "huber"}},
        lambda: E.GradientBoostingRegressor(n_estimators=40, loss="huber", random_state=RS),
    ),
    (
        "hist_gradient_boosting",
        "classification",
        {"kind": "hist_gradient_boosting", "params": {"max_iter": 30}},
        lambda: E.HistGradientBoostingClassifier(max_iter=30, random_state=RS),
    ),
    (
        "random_forest",
        "classification",
        {"kind": "random_forest", "params": {"n_estimators": 35, "max_depth": 6}},
        lambda: E.RandomForestClassifier(
            n_estimators=35, max_depth=6, oob_score=True, random_state=RS
        ),
    ),
    (
        "random_forest",
        "regression",
        {"kind": "random_forest", "params": {"n_estimators": 30, "max_samples": 0.8}},
        lambda: E.RandomForestRegressor(
            n_estimators=30, max_samples=0.8, oob_score=True, random_state=RS
        ),
    ),
    (
        "extra_trees",
        "classification",
        {"kind": "extra_trees", "params": {"n_estimators": 30, "bootstrap": True}},
        lambda: E.ExtraTreesClassifier(
            n_estimators=30, bootstrap=True, oob_score=True, random_state=RS
        ),
    ),
    (
        "extra_trees",
        "regression",
        {"kind": "extra_trees", "params": {"n_estimators": 20}},
        lambda: E.ExtraTreesRegressor(n_estimators=20, random_state=RS),
    ),
    (
        "stacking",
        "classification",
        {
            "kind": "stacking",
            "params": {"passthrough": True},
            "estimators": [
                {"name": "svm", "kind": "svm", "params": {"probability": True}},
                {"name": "knn", "kind": "knn"},
                {
                    "name": "mlp",
                    "kind": "mlp",
                    "params": {"hidden_layer_sizes": [8], "max_iter": 50},
                },
            ],
            "final_estimator": {"kind": "logistic_regression", "params": {"max_iter": 1000}},
        },
        lambda: E.StackingClassifier(
            [
                ("svm", CalibratedClassifierCV(SVC(random_state=RS), ensemble=False)),
                ("knn", KNeighborsClassifier()),
                ("mlp", MLPClassifier(hidden_layer_sizes=(8,), max_iter=50, random_state=RS)),
            ],
            final_estimator=LogisticRegression(max_iter=1000, random_state=RS),
            passthrough=True,
        ),
    ),
    (
        "stacking",
        "regression",
        {
            "kind": "stacking",
            "estimators": [
                {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 10}},
                {"name": "ridge", "kind": "ridge", "params": {"alpha": 0.5}},
            ],
        },
        lambda: E.StackingRegressor(
            [
                ("rf", E.RandomForestRegressor(n_estimators=10, random_state=RS)),
                ("ridge", Ridge(alpha=0.5)),
            ],
            final_estimator=Ridge(),
        ),
    ),
    # The service's own algorithms, called directly as scikit-learn estimators.
    (
        "pasting_votes",
        "classification",
        {"kind": "pasting_votes", "params": {"bite_size": 60, "max_estimators": 15}},
        lambda: PastingVotesClassifier(
            DecisionTreeClassifier(random_state=RS),
            bite_size=60,
            max_estimators=15,
            random_state=RS,
        ),
    ),
    (
        "pasting_votes",
        "regression",
        {"kind": "pasting_votes", "params": {"bite_size": 60, "patience": 3}},
        lambda: PastingVotesRegressor(
            DecisionTreeRegressor(random_state=RS), bite_size=60, patience=3, random_state=RS
        ),
    ),
    (
        "ensemble_selection",
        "classification",
        {
            "kind": "ensemble_selection",
            "params": {"metric": "log_loss", "init_size": 2, "max_steps": 8, "cv": 4},
            "estimators": [
                {"name": "lr", "kind": "logistic_regression", "params": {"max_iter": 2000}},
                {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 4}},
                {"name": "nb", "kind": "gaussian_nb"},
            ],
        },
        lambda: EnsembleSelectionClassifier(
            [
                ("lr", LogisticRegression(max_iter=2000, random_state=RS)),
                ("tree", DecisionTreeClassifier(max_depth=4, random_state=RS)),
                ("nb", GaussianNB()),
            ],
            metric="log_loss",
            init_size=2,
            max_steps=8,
            cv=4,
            random_state=RS,
        ),
    ),
    (
        "ensemble_selection",
        "regression",
        {
            "kind": "ensemble_selection",
            "params": {"metric": "rmse", "bags": 4, "bag_fraction": 0.5},
            "estimators": [
                {"name": "ridge", "kind": "ridge"},
                {"name": "knn", "kind": "knn", "params": {"n_neighbors": 9}},
                {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 10}},
            ],
        },
        lambda: EnsembleSelectionRegressor(
            [
                ("ridge", Ridge()),
                ("knn", KNeighborsRegressor(9)),
                ("rf", E.RandomForestRegressor(n_estimators=10, random_state=RS)),
            ],
            metric="rmse",
            bags=4,
            bag_fraction=0.5,
            random_state=RS,
        ),
    ),
    (
        "adaboost_mh",
        "classification",
        {"kind": "adaboost_mh", "params": {"n_estimators": 30, "max_depth": 2}},
        lambda: AdaBoostMHClassifier(30, max_depth=2),
    ),
    # The boosting libraries: their own estimators with the kinds' fixed parameters and
    # the job's threads (tests/unit/kinds/test_library_kinds.py covers them further).
    (
        "xgboost",
        "classification",
        {"kind": "xgboost", "params": {"n_estimators": 20, "max_depth": 3}},
        lambda: xgboost.XGBClassifier(
            n_estimators=20,
            max_depth=3,
            verbosity=0,
            importance_type="gain",
            random_state=RS,
            n_jobs=MemberPool.local().threads,
        ),
    ),
    (
        "lightgbm",
        "regression",
        {"kind": "lightgbm", "params": {"n_estimators": 20, "num_leaves": 7}},
        lambda: lightgbm.LGBMRegressor(
            n_estimators=20,
            num_leaves=7,
            verbose=-1,
            importance_type="gain",
            deterministic=True,
            force_col_wise=True,
            random_state=RS,
            n_jobs=MemberPool.local().threads,
        ),
    ),
    (
        "catboost",
        "classification",
        {"kind": "catboost", "params": {"iterations": 20, "depth": 4}},
        lambda: catboost.CatBoostClassifier(
            iterations=20,
            depth=4,
            verbose=False,
            allow_writing_files=False,
            random_seed=RS,
            thread_count=MemberPool.local().threads,
        ),
    ),
]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(
    ("kind", "task", "raw", "make"),
    [pytest.param(*case, id=f"{case[0]}-{case[1]}") for case in FIDELITY],
)
def test_fidelity_to_scikit_learn(kind: str, task: str, raw: dict[str, Any], make: Maker) -> None:
    data = training_data("breast_cancer" if task == "classification" else "diabetes")
    model = fit("breast_cancer" if task == "classification" else "diabetes", raw)
    direct = make().fit(data.X.to_numpy(), data.y)
    np.testing.assert_array_equal(model.pipeline.predict(data.X), direct.predict(data.X.to_numpy()))
    if task == "classification" and hasattr(direct, "predict_proba"):
        np.testing.assert_array_equal(
            model.pipeline.predict_proba(data.X), direct.predict_proba(data.X.to_numpy())
        )
    oob = model.metrics.oob
    if hasattr(direct, "oob_scores_"):  # gradient boosting: OOB loss per stage
        assert oob["loss"] == direct.oob_score_
        assert oob["loss_curve"] == list(direct.oob_scores_)
    elif hasattr(direct, "oob_score_"):
        assert oob["n_scored"] == len(data.y)
        assert oob["accuracy" if task == "classification" else "r2"] == direct.oob_score_


def test_fidelity_covers_every_kind() -> None:
    assert {c[0] for c in FIDELITY} == {k.name for k in ENSEMBLE_KINDS}


# --- OOB by hand where scikit-learn refuses -----------------------------------------


def _oob_by_hand(model: FittedModel, X: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    bag = model.pipeline[-1]
    n, k = len(y), len(bag.classes_)
    votes = np.zeros((n, k))
    for est, samples, feats in zip(
        bag.estimators_, bag.estimators_samples_, bag.estimators_features_, strict=True
    ):
        out = np.ones(n, dtype=bool)
        out[samples] = False
        for i in np.flatnonzero(out):
            votes[i] += est.predict_proba(X[i : i + 1, feats])[0]
    scored = votes.sum(axis=1) > 0
    pred = bag.classes_[np.argmax(votes[scored], axis=1)]
    return float(np.mean(pred == y[scored])), int(scored.sum())


@pytest.mark.parametrize("kind", ["pasting", "random_patches"])
def test_oob_where_scikit_learn_refuses_equals_a_by_hand_computation(kind: str) -> None:
    data = training_data("iris")
    model = fit("iris", {"kind": kind, "params": {"n_estimators": 6, "max_samples": 0.3}})
    assert model.pipeline[-1].oob_score is False  # scikit-learn would refuse it here
    accuracy, n_scored = _oob_by_hand(model, data.X.to_numpy(), data.y)
    assert model.metrics.oob["accuracy"] == pytest.approx(accuracy, abs=1e-12)
    assert model.metrics.oob["n_scored"] == n_scored
    assert 0 < n_scored <= len(data.y)


def test_gradient_boosting_with_subsample_reports_its_oob_loss_curve() -> None:
    model = fit(
        "breast_cancer",
        {"kind": "gradient_boosting", "params": {"n_estimators": 25, "subsample": 0.6}},
    )
    oob = model.metrics.oob
    assert len(oob["loss_curve"]) == 25
    assert oob["loss"] == oob["loss_curve"][-1]


def test_no_oob_is_explained_in_notes_when_the_kind_can_have_one() -> None:
    model = fit("iris", {"kind": "gradient_boosting", "params": {"n_estimators": 5}})
    assert model.metrics.oob is None  # subsample = 1: this fit left no row out
    assert any("OOB" in note for note in model.metrics.notes)
    model = fit("iris", {"kind": "adaboost", "params": {"n_estimators": 5}})
    assert model.metrics.oob is None  # AdaBoost never leaves rows out: nothing to explain
    assert not any("OOB" in note for note in model.metrics.notes)


# --- members in parallel, progress and cancellation ----------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "random_forest", "params": {"n_estimators": 23}},
        {"kind": "bagging", "params": {"n_estimators": 17, "max_features": 0.6}},
        {"kind": "random_patches", "params": {"n_estimators": 13}},
        {"kind": "gradient_boosting", "params": {"n_estimators": 21, "subsample": 0.5}},
    ],
    ids=lambda raw: raw["kind"],
)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_training_with_progress_equals_a_one_shot_fit(raw: dict[str, Any], threads: int) -> None:
    """However many threads fit the members, counted as they finish: scikit-learn's model."""
    data = training_data("wine")
    seen: list[tuple[int, int, str]] = []
    model = fit(
        "wine", raw, on_progress=lambda d, t, s: seen.append((d, t, s)), pool=MemberPool(threads)
    )
    fitting = [(d, t) for d, t, s in seen if s == "fitting"]
    n = raw["params"]["n_estimators"]
    assert len(fitting) > 2 and fitting[-1] == (n, n)
    assert [d for d, _ in fitting] == sorted(d for d, _ in fitting)
    assert any(0 < d < n for d, _ in fitting)  # counted as they finish, not at the end
    one_shot = clone(model.pipeline[-1])
    with parallel_config(backend="sequential"):
        one_shot.fit(data.X.to_numpy(), data.y)
    np.testing.assert_array_equal(
        model.pipeline.predict_proba(data.X), one_shot.predict_proba(data.X.to_numpy())
    )
    if hasattr(one_shot, "estimators_samples_"):
        for ours, theirs in zip(
            model.pipeline[-1].estimators_samples_, one_shot.estimators_samples_, strict=True
        ):
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("kind", ["random_forest", "gradient_boosting", "bagging"])
def test_a_cancelled_fit_stops(kind: str) -> None:
    token = CancelAfter(3)
    raw = {"kind": kind, "params": {"n_estimators": 200}}
    with pytest.raises(TrainingCancelledError):
        fit("wine", raw, on_progress=token.tick, cancel=token)
    assert token.left <= 0


# --- metrics and explanations --------------------------------------------------------


def test_metrics_hold_every_figure_and_no_note_for_what_voting_never_has() -> None:
    model = fit(
        "iris",
        {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [
                {"name": "lr", "kind": "logistic_regression", "params": {"max_iter": 500}},
                {"name": "nb", "kind": "gaussian_nb"},
            ],
        },
        EvaluationSpec(holdout_fraction=0.2, cv_folds=3),
    )
    m = model.metrics
    assert set(m.holdout) >= {
        "accuracy",
        "balanced_accuracy",
        "f1_macro",
        "f1_weighted",
        "log_loss",
        "roc_auc",
    }
    assert m.holdout["n"] == 30
    assert m.cv["n_folds"] == 3 and len(m.cv["folds"]) == 3
    assert [e["name"] for e in m.estimators] == ["lr", "nb"]
    assert all("accuracy" in e["holdout"] for e in m.estimators)
    assert m.oob is None and m.curve is None
    # A voting ensemble never has an OOB estimate or a curve: no note explains their absence
    # (the report names them among what it lacks); hold-out and folds were both asked for.
    assert m.notes == []


def test_homogeneous_ensembles_report_member_spread_and_an_oob_curve() -> None:
    model = fit("wine", {"kind": "random_forest", "params": {"n_estimators": 60}}, EvaluationSpec())
    spread = model.metrics.estimators[0]
    assert spread["n_members"] == 60
    stats = spread["holdout"]["accuracy"]
    assert stats["min"] <= stats["mean"] <= stats["max"]
    curve = model.metrics.curve
    assert curve["basis"] == "oob" and curve["points"][-1]["n_estimators"] == 60
    assert curve["points"][-1]["score"] == pytest.approx(model.metrics.oob["accuracy"])


def test_boosting_reports_a_staged_holdout_curve() -> None:
    model = fit("wine", {"kind": "adaboost", "params": {"n_estimators": 20}}, EvaluationSpec())
    curve = model.metrics.curve
    assert curve["basis"] == "holdout"
    assert [p["n_estimators"] for p in curve["points"]] == list(range(1, 21))
    assert curve["points"][-1]["score"] == model.metrics.holdout["accuracy"]


def test_feature_importances_use_the_original_column_names() -> None:
    model = fit("iris", {"kind": "random_forest", "params": {"n_estimators": 20}})
    importances = model.feature_importances
    assert importances is not None
    assert set(importances) == set(training_data("iris").X.columns)
    assert sum(importances.values()) == pytest.approx(1.0)


# --- mixed-type tables ---------------------------------------------------------------


def _mixed_table() -> Any:
    from ensembles.data import table_from_records

    rng = np.random.default_rng(0)
    records = []
    for i in range(240):
        colour = ["red", "green", "blue"][i % 3]
        size = float(rng.normal(10, 3))
        records.append(
            {
                "colour": None if i % 17 == 0 else colour,
                "size": None if i % 11 == 0 else size,
                "count": int(rng.integers(0, 5)),
                "member": bool(i % 2),
                "label": "big" if size + (colour == "red") * 3 > 11 else "small",
            }
        )
    return table_from_records(records)


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "random_forest", "params": {"n_estimators": 20}},
        {"kind": "hist_gradient_boosting", "params": {"max_iter": 20}},
        {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [
                {"name": "lr", "kind": "logistic_regression", "params": {"max_iter": 500}},
                {"name": "nb", "kind": "gaussian_nb"},
            ],
        },
    ],
    ids=lambda raw: raw["kind"],
)
def test_mixed_type_tables_train_on_raw_columns(raw: dict[str, Any]) -> None:
    from ensembles.data import select_training_data, to_model_frame

    table = _mixed_table()
    data = select_training_data(table, "label")
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    model = train(data, spec, EvaluationSpec(holdout_fraction=0.25), RS)
    assert model.metrics.holdout["accuracy"] > 0.7
    features = {f.name: f for f in model.signature.features}
    assert features["size"].has_missing and not features["count"].has_missing
    # The encoders' categories (the missing value left out), whatever the encoding.
    assert model.signature.categories == {
        "colour": ("blue", "green", "red"),
        "member": (False, True),
    }
    # Unseen categories and missing values at predict time are tolerated where allowed.
    rows = table.frame.drop(columns=["label"]).head(3).copy()
    rows["colour"] = ["purple", None, "red"]
    frame = to_model_frame(rows, {f.name: f.dtype for f in model.signature.features})  # type: ignore[misc]
    assert model.pipeline.predict(frame).shape == (3,)
    if raw["kind"] == "random_forest":
        assert model.feature_importances is not None
        assert set(model.feature_importances) == {"colour", "size", "count", "member"}
