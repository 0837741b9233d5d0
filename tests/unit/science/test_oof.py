"""Out-of-fold scores equal scikit-learn's ``cross_val_predict`` called directly on the
same folds: stacking's members and stacked ensemble, and cross-validated voting."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm
from sklearn.base import clone
from sklearn.ensemble import StackingClassifier, StackingRegressor, VotingClassifier
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_predict
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsRegressor
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from ensembles.science.oof import meta_features, stacking_oof
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

RS = 3


def _members(task: str) -> list[dict[str, Any]]:
    if task == "classification":
        return [
            {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            {"name": "nb", "kind": "gaussian_nb"},
        ]
    return [
        {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
        {"name": "knn", "kind": "knn"},
    ]


@pytest.mark.parametrize(
    ("dataset", "passthrough"),
    [("wine", False), ("breast_cancer", False), ("diabetes", False)],
    ids=["3-classes", "binary", "regression"],
)
def test_stacking_oof_equals_cross_val_predict(dataset: str, passthrough: bool) -> None:
    data = training_data(dataset)
    task = data.task
    raw = {
        "kind": "stacking",
        "params": {"cv": 4, "passthrough": passthrough},
        "estimators": _members(task),
    }
    spec = resolve_ensemble(parse_estimator_spec(raw), task)
    fitted = train(data, spec, EvaluationSpec(holdout_fraction=0.0), RS)
    oof = fitted.metrics.oof
    assert oof is not None
    assert oof["folds"]["n_folds"] == 4 and oof["folds"]["shuffle"] is False
    X = data.X.to_numpy(dtype=float)
    y = np.asarray(data.y)
    if task == "classification":
        cv: Any = StratifiedKFold(4)
        members = [DecisionTreeClassifier(max_depth=3, random_state=RS), GaussianNB()]
        stack: Any = StackingClassifier(
            list(zip(["tree", "nb"], members, strict=True)),
            final_estimator=LogisticRegression(random_state=RS),
            cv=4,
            passthrough=passthrough,
        )
        outputs = [
            cross_val_predict(clone(m), X, y, cv=cv, method="predict_proba") for m in members
        ]
        for name, out in zip(["tree", "nb"], outputs, strict=True):
            labels = np.unique(y)[np.argmax(out, axis=1)]
            assert oof["members"][name]["accuracy"] == skm.accuracy_score(y, labels)
            assert oof["members"][name]["log_loss"] == pytest.approx(skm.log_loss(y, out))
        meta = np.hstack([o[:, 1:] if o.shape[1] == 2 else o for o in outputs])
    else:
        cv = KFold(4)
        members = [DecisionTreeRegressor(max_depth=3, random_state=RS), KNeighborsRegressor()]
        stack = StackingRegressor(
            list(zip(["tree", "knn"], members, strict=True)), final_estimator=Ridge(), cv=4
        )
        outputs = [cross_val_predict(clone(m), X, y, cv=cv) for m in members]
        for name, out in zip(["tree", "knn"], outputs, strict=True):
            assert oof["members"][name]["r2"] == skm.r2_score(y, out)
        meta = np.column_stack(outputs)
    if passthrough:
        meta = np.hstack([meta, X])
    final = stack.final_estimator
    direct = cross_val_predict(clone(final), meta, y, cv=cv)
    if task == "classification":
        assert oof["ensemble"]["accuracy"] == skm.accuracy_score(y, direct)
    else:
        assert oof["ensemble"]["r2"] == skm.r2_score(y, direct)


@pytest.mark.parametrize("dataset", ["wine", "breast_cancer"])
def test_meta_features_are_those_stacking_trains_its_final_estimator_on(dataset: str) -> None:
    """Refitting the final estimator on the rebuilt meta-features gives the fitted one."""
    data = training_data(dataset)
    X = StandardScaler().fit_transform(data.X.to_numpy(dtype=float)[:, :6])
    y = np.asarray(data.y)
    stack = StackingClassifier(
        [("tree", DecisionTreeClassifier(max_depth=2, random_state=0)), ("nb", GaussianNB())],
        final_estimator=LogisticRegression(),
        cv=3,
        passthrough=True,
    ).fit(X, y)
    outputs = [
        cross_val_predict(clone(est), X, y, cv=StratifiedKFold(3), method="predict_proba")
        for _, est in stack.estimators
    ]
    refit = clone(stack.final_estimator).fit(meta_features(stack, outputs, X), y)
    np.testing.assert_array_equal(refit.coef_, stack.final_estimator_.coef_)
    found = stacking_oof(stack, X, y, "classification")
    assert set(found.members) == {"tree", "nb"}
    assert found.folds["n_folds"] == 3


def test_voting_cv_oof_equals_cross_val_predict() -> None:
    data = training_data("wine")
    raw = {"kind": "voting", "params": {"voting": "soft"}, "estimators": _members("classification")}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    fitted = train(data, spec, EvaluationSpec(holdout_fraction=0.0, cv_folds=4), RS)
    oof = fitted.metrics.oof
    assert oof is not None
    assert oof["folds"] == {
        "n_folds": 4,
        "splitter": "StratifiedKFold",
        "shuffle": True,
        "random_state": RS,
        "test_sizes": [45, 45, 44, 44],
    }
    X = data.X.to_numpy(dtype=float)
    y = np.asarray(data.y)
    cv = StratifiedKFold(4, shuffle=True, random_state=RS)
    members = [DecisionTreeClassifier(max_depth=3, random_state=RS), GaussianNB()]
    vote = VotingClassifier(list(zip(["tree", "nb"], members, strict=True)), voting="soft")
    assert oof["ensemble"]["accuracy"] == skm.accuracy_score(
        y, cross_val_predict(vote, X, y, cv=cv)
    )
    for name, member in zip(["tree", "nb"], members, strict=True):
        direct = cross_val_predict(clone(member), X, y, cv=cv, method="predict_proba")
        labels = np.unique(y)[np.argmax(direct, axis=1)]
        assert oof["members"][name]["accuracy"] == skm.accuracy_score(y, labels)
        assert oof["members"][name]["log_loss"] == pytest.approx(skm.log_loss(y, direct))
    # The CV figures and the OOF figures come from the same folds.
    assert fitted.metrics.cv is not None and fitted.metrics.cv["n_folds"] == 4
    # Without a hold-out, diversity is judged on these out-of-fold predictions.
    assert fitted.metrics.diversity is not None
    assert fitted.metrics.diversity["evaluated_on"] == "oof"
    assert fitted.metrics.diversity["condorcet"]["ensemble_accuracy"] == oof["ensemble"]["accuracy"]
