"""ensemble_selection: the greedy selection on a hand-made prediction matrix, the
out-of-fold predictions against ``cross_val_predict``, the model it becomes, and the
paper's claim that the selection beats the best single member of its library."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import datasets
from sklearn import metrics as skm
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier, VotingClassifier
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import StratifiedKFold, cross_val_predict, train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from ensembles.errors import TrainingCancelledError
from ensembles.kinds import EnsembleSelectionClassifier, EnsembleSelectionRegressor
from ensembles.kinds.selection import METRICS, bag_size, bagged_selection, greedy_selection
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.cancel import CancelAfter
from tests.unit.datasets import training_data

RS = 3

# Three members' predictions of three rows whose target is 0 (regression, mae):
#   a = ( 2, -1,  0)  mae 1      b = (-2, 0, 1)  mae 1      c = (1, 1, -3)  mae 5/3
# init: a (ties b on 1; library order)
# step 1: a+a -> 1, a+b -> (0, -.5, .5): 1/3, a+c -> (1.5, 0, -1.5): 1      -> b, 1/3
# step 2: /3 of (0,-1,1)+a = (2,-2,1): 5/9, +b = (-2,-1,2): 5/9, +c = (1,0,-2): 1/3 -> c
# step 3: /4 of (1,0,-2)+a = (3,-1,-2): 1/2, +b = (-1,0,-1): 1/6, +c = (2,1,-5): 2/3 -> b
HAND = np.array([[2.0, -1.0, 0.0], [-2.0, 0.0, 1.0], [1.0, 1.0, -3.0]])
ZEROS = np.zeros(3)


def test_a_three_step_selection_on_a_hand_made_matrix() -> None:
    selection = greedy_selection(HAND, ZEROS, METRICS["mae"], init_size=1, max_steps=3)
    assert selection.added == (0, 1, 2, 1)
    assert selection.curve == pytest.approx((1.0, 1 / 3, 1 / 3, 1 / 6), abs=1e-15)
    assert selection.best_step == 3
    assert selection.counts(3).tolist() == [1, 2, 1]


def test_the_best_prefix_is_the_earliest_best_step() -> None:
    # Two steps: steps 1 and 2 both score 1/3; the shorter prefix (a, b) is kept.
    selection = greedy_selection(HAND, ZEROS, METRICS["mae"], init_size=1, max_steps=2)
    assert selection.best_step == 1 and selection.counts(3).tolist() == [1, 1, 0]


def test_sorted_initialisation_starts_with_the_best_members() -> None:
    # init a and b (the two best own scores): (0, -.5, .5) -> 1/3; then +c: (1,0,-2)/3 -> 1/3,
    # +a: (2,-2,1)/3 -> 5/9, +b: (-2,-1,2)/3 -> 5/9: c; the prefix stays at the initial two.
    selection = greedy_selection(HAND, ZEROS, METRICS["mae"], init_size=2, max_steps=1)
    assert selection.added == (0, 1, 2)
    assert selection.curve == pytest.approx((1 / 3, 1 / 3), abs=1e-15)
    assert selection.counts(3).tolist() == [1, 1, 0]


def test_metrics_to_minimise_and_maximise_pick_the_same_member() -> None:
    y = np.array([0, 1, 1])
    good = np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6]])
    bad = np.array([[0.4, 0.6], [0.6, 0.4], [0.5, 0.5]])
    proba = np.stack([bad, good])
    for name in ("accuracy", "log_loss", "roc_auc", "balanced_accuracy", "f1_macro"):
        selection = greedy_selection(proba, y, METRICS[name], init_size=1, max_steps=0)
        assert selection.added == (1,), name


def test_bagged_selection_sums_the_counts_of_its_bags() -> None:
    rng = np.random.default_rng(0)
    predictions = rng.normal(size=(6, 40))
    target = predictions[:3].mean(axis=0)
    counts, runs = bagged_selection(
        predictions,
        target,
        METRICS["rmse"],
        init_size=1,
        max_steps=5,
        bags=4,
        bag_fraction=0.5,
        rng=np.random.default_rng(1),
    )
    assert len(runs) == 4 and all(len(subset) == bag_size(6, 0.5) == 3 for subset, _ in runs)
    summed = np.zeros(6, dtype=int)
    for subset, selection in runs:
        summed[subset] += selection.counts(3)
    np.testing.assert_array_equal(counts, summed)
    assert [bag_size(3, f) for f in (0.1, 0.5, 0.67, 1.0)] == [1, 2, 2, 3]


# --- the estimator ---------------------------------------------------------------------


def _scaled(X: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Standardised columns: logistic regression converges in a few iterations."""
    return np.asarray(StandardScaler().fit_transform(X))


def _library(seed: int) -> list[tuple[str, Any]]:
    return [
        ("lr", LogisticRegression(C=0.05, random_state=seed)),
        ("knn", KNeighborsClassifier(15)),
        ("tree", DecisionTreeClassifier(max_depth=5, random_state=seed)),
        ("nb", GaussianNB()),
        ("rf", RandomForestClassifier(n_estimators=30, random_state=seed)),
        ("et", ExtraTreesClassifier(n_estimators=30, random_state=seed)),
    ]


def test_out_of_fold_scores_are_cross_val_predict_on_the_same_folds() -> None:
    X, y = datasets.load_wine(return_X_y=True)
    X = _scaled(X)
    library = _library(RS)[:4]
    model = EnsembleSelectionClassifier(
        library, metric="log_loss", cv=4, max_steps=10, random_state=RS
    ).fit(X, y)
    folds = StratifiedKFold(4, shuffle=True, random_state=RS)
    selection = model.report_.metrics["selection"]
    for name, member in library:
        oof = cross_val_predict(member, X, y, cv=folds, method="predict_proba")
        assert selection["member_oof"][name] == skm.log_loss(y, oof)
    assert selection["folds"] == 4 and sum(selection["weights"].values()) <= 1 + 10


def test_the_model_is_a_weighted_soft_vote_of_the_selected_members_refitted() -> None:
    X, y = datasets.load_breast_cancer(return_X_y=True)
    X = _scaled(X)
    library = _library(RS)
    model = EnsembleSelectionClassifier(
        library, metric="log_loss", max_steps=15, random_state=RS
    ).fit(X, y)
    voting = model.ensemble_
    weights = model.report_.metrics["selection"]["weights"]
    assert isinstance(voting, VotingClassifier) and voting.voting == "soft"
    assert [name for name, _ in voting.estimators] == list(weights)
    assert voting.weights == [float(w) for w in weights.values()]
    direct = VotingClassifier(
        [(n, e) for n, e in library if n in weights],
        voting="soft",
        weights=list(weights.values()),
    ).fit(X, y)
    np.testing.assert_array_equal(model.predict_proba(X), direct.predict_proba(X))
    np.testing.assert_array_equal(model.predict(X), direct.predict(X))


@pytest.mark.parametrize("seed", range(5))
def test_selection_beats_the_best_single_member_of_its_library(seed: int) -> None:
    """Caruana et al. (2004): the selected ensemble beats the best single model chosen on
    the same data.  On wine, selected by log loss: its out-of-fold log loss is at most the
    best member's (step 0 is that member), and on a hold-out of 30% its log loss is below
    that of the member the out-of-fold scores pick, trained alone (every seed; the gap is
    0.01 to 0.08)."""
    X, y = datasets.load_wine(return_X_y=True)
    X = _scaled(X)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, random_state=seed, stratify=y
    )
    model = EnsembleSelectionClassifier(
        _library(seed), metric="log_loss", max_steps=20, random_state=seed
    ).fit(X_train, y_train)
    selection = model.report_.metrics["selection"]
    oof = selection["member_oof"]
    assert selection["ensemble_oof"] <= min(oof.values())
    best = min(oof, key=oof.get)
    single = dict(_library(seed))[best].fit(X_train, y_train)
    ensemble_loss = skm.log_loss(y_test, model.predict_proba(X_test))
    assert ensemble_loss < skm.log_loss(y_test, single.predict_proba(X_test)), best


def test_regression_selects_a_weighted_mean() -> None:
    X, y = datasets.load_diabetes(return_X_y=True)
    library = [
        ("ridge", Ridge(alpha=0.1)),
        ("knn", KNeighborsRegressor(20)),
        ("tree", DecisionTreeRegressor(max_depth=3, random_state=RS)),
    ]
    model = EnsembleSelectionRegressor(library, metric="rmse", random_state=RS).fit(X, y)
    weights = model.report_.metrics["selection"]["weights"]
    members = dict(model.ensemble_.named_estimators_.items())
    expected = sum(weights[n] * members[n].predict(X) for n in weights) / sum(weights.values())
    np.testing.assert_allclose(model.predict(X), expected, rtol=0, atol=1e-9)
    curve = model.report_.curves[0]
    assert curve["name"] == "selection" and curve["x"][0] == 0 and len(curve["x"]) == 51


def test_training_reports_the_selection_and_its_curve_and_refits_on_every_row() -> None:
    data = training_data("iris")
    raw = {
        "kind": "ensemble_selection",
        "params": {"metric": "log_loss", "bags": 3, "bag_fraction": 0.67, "max_steps": 5},
        "estimators": [
            {"name": "lr", "kind": "logistic_regression", "params": {"max_iter": 1000}},
            {"name": "nb", "kind": "gaussian_nb"},
            {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 20}},
        ],
    }
    spec = resolve_ensemble(parse_estimator_spec(raw), "classification")
    seen: list[tuple[int, int, str]] = []
    model = train(
        data, spec, EvaluationSpec(holdout_fraction=0.2), RS, on_progress=lambda *a: seen.append(a)
    )
    m = model.metrics
    assert m.selection is not None and set(m.selection["member_oof"]) == {"lr", "nb", "rf"}
    assert sum(m.selection["weights"].values()) <= 3 * (1 + 5)
    assert [c.name for c in m.curves] == [
        "selection_bag_1",
        "selection_bag_2",
        "selection_bag_3",
        "bagged_selection",
    ]
    assert {s for _, _, s in seen} >= {"out_of_fold", "selecting", "refitting"}
    assert model.signature.voting == "soft"
    assert [e["name"] for e in m.estimators] == list(m.selection["weights"])
    assert len(model.pipeline[-1].estimators_[0].classes_) == 3


def test_a_cancelled_selection_stops_between_members() -> None:
    data = training_data("wine")
    members = [{"name": f"tree{i}", "kind": "decision_tree"} for i in range(30)]
    raw = {"kind": "ensemble_selection", "estimators": members}
    spec = resolve_ensemble(parse_estimator_spec(raw), "classification")
    token = CancelAfter(3)
    with pytest.raises(TrainingCancelledError):
        train(data, spec, EvaluationSpec(), RS, on_progress=token.tick, cancel=token)
    assert token.left > -3  # stopped within a member of the cancel, not after all 30
