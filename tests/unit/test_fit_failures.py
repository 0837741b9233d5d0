"""Training that the data or the spec makes impossible: refused before training where it
certainly fails (check_against_rows), a problem with a path where scikit-learn refuses it
during training, and a bug of ours left a bug; AdaBoost's early stop is said."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from ensembles import metrics
from ensembles.data import TrainingData, select_training_data, table_from_frame
from ensembles.errors import TrainingError
from ensembles.fit_errors import raised_by_scikit_learn
from ensembles.specs import EstimatorSpec, EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import check_against_rows, resolve_ensemble
from tests.unit.datasets import frame

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

RS = 3
HOLDOUT = ("evaluation", "holdout_fraction")
CV_FOLDS = ("evaluation", "cv_folds")
KNN_IN_BAGGING = ("ensemble", "estimator", "params", "n_neighbors")


def iris() -> TrainingData:
    return select_training_data(table_from_frame(frame("iris")), "target")


def rows_of(counts: dict[str, int]) -> TrainingData:
    """A two-feature table whose target ``y`` has these rows per class."""
    labels = [label for label, n in counts.items() for _ in range(n)]
    table = pd.DataFrame(
        {
            "x": np.arange(len(labels), dtype=float),
            "z": np.arange(len(labels), dtype=float) % 3,
            "y": labels,
        }
    )
    return select_training_data(table_from_frame(table), "y", task="classification")


def bagged_knn(n_neighbors: int, kind: str = "bagging", **params: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "params": {"n_estimators": 3, **params},
        "estimator": {"kind": "knn", "params": {"n_neighbors": n_neighbors}},
    }


def stacked_knn(n_neighbors: int, cv: int = 5) -> dict[str, Any]:
    return {
        "kind": "stacking",
        "params": {"cv": cv},
        "estimators": [
            {"name": "knn", "kind": "knn", "params": {"n_neighbors": n_neighbors}},
            {"name": "tree", "kind": "decision_tree"},
        ],
    }


def resolved(data: TrainingData, raw: dict[str, Any]) -> EstimatorSpec:
    return resolve_ensemble(parse_estimator_spec(raw), data.task)


def check(
    data: TrainingData, raw: dict[str, Any] | None, holdout: float = 0.2, cv: int = 0
) -> list[tuple[tuple[Any, ...], str]]:
    spec = None if raw is None else resolved(data, raw)
    evaluation = EvaluationSpec(holdout_fraction=holdout, cv_folds=cv)
    return [(p.loc, p.msg) for p in check_against_rows(spec, evaluation, data.y, data.task, RS)]


def fit(data: TrainingData, raw: dict[str, Any], holdout: float = 0.2, cv: int = 0) -> Any:
    evaluation = EvaluationSpec(holdout_fraction=holdout, cv_folds=cv)
    return train(data, resolved(data, raw), evaluation, RS)


FOREST = {"kind": "random_forest", "params": {"n_estimators": 3}}


# ----------------------------------------------------------------- before training


def test_holdout_that_leaves_fewer_training_rows_than_classes() -> None:
    [(loc, msg)] = check(iris(), FOREST, holdout=0.99)
    assert loc == HOLDOUT
    assert "leaves 1 training row for 3 classes" in msg
    assert "set evaluation.holdout_fraction to at most 0.98" in msg
    assert check(iris(), FOREST, holdout=0.98) == []
    fit(iris(), FOREST, holdout=0.98)  # the advice is true


def test_a_class_of_one_row_cannot_be_split() -> None:
    data = rows_of({"a": 10, "b": 10, "c": 1})
    [(loc, msg)] = check(data, FOREST)
    assert loc == ("target",)
    assert msg.startswith("class 'c' has 1 row;")
    assert "set evaluation.holdout_fraction to 0" in msg
    assert check(data, FOREST, holdout=0) == []


def test_a_class_the_split_leaves_without_training_rows() -> None:
    # Stratification keeps 2 of 1002 rows for training, both of the large class.
    data = rows_of({"big": 1000, "small": 2})
    [(loc, msg)] = check(data, None, holdout=0.998)
    assert loc == HOLDOUT
    assert "leaves class 'small' (2 rows) without a training row" in msg


def test_folds_against_training_rows_and_classes() -> None:
    data = rows_of({"a": 4, "b": 4})
    [(loc, msg)] = check(data, FOREST, holdout=0, cv=6)
    assert loc == CV_FOLDS and "set cv_folds to at most 4" in msg
    assert check(data, FOREST, holdout=0, cv=4) == []
    [(loc, msg)] = check(data, FOREST, holdout=0, cv=9)
    assert loc == CV_FOLDS and "cv_folds=9 needs at least 9 training rows; there are 8" in msg
    # 2 rows of 'c' hold out 1: the fold scoring the other trains without it.
    [(loc, msg)] = check(rows_of({"a": 10, "b": 10, "c": 2}), FOREST, holdout=0.5, cv=2)
    assert loc == CV_FOLDS and msg.startswith("class 'c' has 1 training row;")


def test_fewer_rows_of_a_class_than_folds_is_a_note_not_a_refusal() -> None:
    data = rows_of({"a": 12, "b": 3})
    assert check(data, FOREST, holdout=0, cv=5) == []
    notes = fit(data, FOREST, holdout=0, cv=5).metrics.notes
    assert "class 'b' has 3 training rows, fewer than cv_folds=5: 2 of the folds" in " ".join(notes)


def test_knn_neighbours_against_the_rows_of_each_fit() -> None:
    [(loc, msg)] = check(iris(), bagged_knn(500))
    assert loc == KNN_IN_BAGGING
    assert msg == (
        "n_neighbors=500, but this knn is fitted on at most 120 rows (the 120 training rows "
        "left after holding out 30 of 150; bagging draws 120 of them per member): "
        "set n_neighbors to at most 120"
    )
    [(loc, msg)] = check(iris(), bagged_knn(61, kind="pasting", max_samples=0.5))
    assert loc == KNN_IN_BAGGING and "pasting draws 60 of them per member" in msg
    [(loc, msg)] = check(iris(), stacked_knn(97))
    assert loc == ("ensemble", "estimators", 0, "params", "n_neighbors")
    assert "stacking's cv=5 fits each member on at most 96 of them" in msg
    # Only cross-validation's folds are too small: 120 - 120 // 5 = 96 rows.
    [(loc, msg)] = check(iris(), bagged_knn(100), cv=5)
    assert loc == KNN_IN_BAGGING and "cross-validation (cv_folds=5)" in msg
    assert "at most 96" in msg


@pytest.mark.parametrize(
    ("raw", "largest"),
    [
        (bagged_knn(120), True),
        (bagged_knn(121), False),
        (bagged_knn(60, kind="pasting", max_samples=0.5), True),
        (bagged_knn(61, kind="pasting", max_samples=0.5), False),
        (stacked_knn(96), True),
        (stacked_knn(97), False),
    ],
    ids=["bagging-120", "bagging-121", "pasting-60", "pasting-61", "stacking-96", "stacking-97"],
)
def test_the_bound_is_exact(raw: dict[str, Any], largest: bool) -> None:
    """What the check lets through trains; what it refuses fails in training too."""
    assert (check(iris(), raw) == []) is largest
    if largest:
        fit(iris(), raw)
    else:
        with pytest.raises(TrainingError) as failed:
            fit(iris(), raw)
        assert failed.value.problems[0].loc[-1] == "n_neighbors"


def test_pasting_more_rows_than_there_are() -> None:
    raw = {"kind": "pasting", "params": {"max_samples": 500}}
    [(loc, msg)] = check(iris(), raw)
    assert loc == ("ensemble", "params", "max_samples")
    assert "draws rows without replacement from at most 120" in msg
    # With replacement, 500 draws of 120 rows are fine.
    assert check(iris(), {"kind": "bagging", "params": {"max_samples": 500}}) == []


def test_stacking_folds_against_the_classes() -> None:
    data = rows_of({"a": 3, "b": 3, "c": 3})
    [(loc, msg)] = check(data, stacked_knn(1, cv=5), holdout=0)
    assert loc == ("ensemble", "params", "cv")
    assert "every class has fewer than 5 rows" in msg and "set cv to at most 3" in msg
    assert check(data, stacked_knn(1, cv=3), holdout=0) == []


def test_nothing_to_say_about_a_sound_request() -> None:
    assert check(iris(), FOREST, cv=5) == []
    assert check(iris(), bagged_knn(5), cv=5) == []


# ----------------------------------------------------------------- during training


def test_a_refusal_of_scikit_learn_in_fit_is_a_training_error_with_a_path() -> None:
    raw = {
        "kind": "bagging",
        "estimator": {"kind": "logistic_regression", "params": {"l1_ratio": 0.5}},
    }
    assert check(iris(), raw) == []  # scikit-learn only says so in fit
    with pytest.raises(TrainingError) as failed:
        fit(iris(), raw)
    assert failed.value.detail.startswith("scikit-learn could not fit this model: Solver lbfgs")
    [problem] = failed.value.problems
    assert problem.loc == ("ensemble", "estimator", "params", "solver")
    assert "got elasticnet penalty" in problem.msg


def test_a_value_error_of_our_own_code_is_not_the_users() -> None:
    """An unchecked spec reaching training is a bug: it stays a ValueError (a 500)."""
    data = iris()
    spec = EstimatorSpec(kind="random_forest", params={"n_estimators": "many"})
    with pytest.raises(ValueError, match="invalid literal for int") as failed:
        train(data, spec, EvaluationSpec(), RS)
    assert not isinstance(failed.value, TrainingError)
    assert not raised_by_scikit_learn(failed.value)


def test_where_an_error_was_raised() -> None:
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(ValueError) as inside:
        LogisticRegression(l1_ratio=0.5).fit([[0.0], [1.0]], [0, 1])
    assert raised_by_scikit_learn(inside.value)
    with pytest.raises(ValueError) as called:
        metrics.score("classification", np.array(["a", "b"]), np.array(["a", "b"]), classes=[])
    assert raised_by_scikit_learn(called.value)  # our code called it, scikit-learn refused
    with pytest.raises(ValueError) as plain:
        np.asarray(["x"]).astype(float)
    assert not raised_by_scikit_learn(plain.value)


# ----------------------------------------------------------------- AdaBoost


def test_adaboost_that_stops_early_says_so() -> None:
    raw = {
        "kind": "adaboost",
        "params": {"n_estimators": 50},
        "estimator": {"kind": "decision_tree", "params": {"max_depth": None}},
    }
    fitted = fit(iris(), raw)
    assert fitted.training["n_estimators"] == 1
    assert (
        "AdaBoost stopped after 1 of 50 members: member 1 fits the training rows perfectly "
        "(weighted error 0), so there is nothing left to boost"
    ) in fitted.metrics.notes
    stumps = fit(iris(), {"kind": "adaboost", "params": {"n_estimators": 5}})
    assert stumps.training["n_estimators"] == 5
    assert not any("AdaBoost stopped" in note for note in stumps.metrics.notes)


def test_adaboost_member_of_voting_that_stops_early_is_named() -> None:
    raw = {
        "kind": "voting",
        "estimators": [
            {
                "name": "boost",
                "kind": "adaboost",
                "estimator": {"kind": "decision_tree", "params": {"max_depth": None}},
            },
            {"name": "tree", "kind": "decision_tree"},
        ],
    }
    notes = fit(iris(), raw).metrics.notes
    assert any(n.startswith("member 'boost': AdaBoost stopped after 1 of 50") for n in notes)
