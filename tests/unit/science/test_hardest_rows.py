"""AdaBoost's hardest rows: the replayed weights against a hand-worked four-mushroom table,
against the weights scikit-learn itself handed each member, and mapped back to the
uploaded table through the hold-out split."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.ensemble import AdaBoostClassifier, AdaBoostRegressor
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from ensembles.data import select_training_data, table_from_frame
from ensembles.science.hardest_rows import replay, replay_samme
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import frame, training_data


def test_four_mushrooms_by_hand() -> None:
    """Four mushrooms, one feature; the second is the odd edible one.

    Member 1 (uniform weights): the unique best stump splits at 2.5; its left leaf holds
    one poisonous and one edible mushroom (a tie: the first class, edible), so it says
    edible, edible, poisonous, poisonous: row 0 wrong, ε = 1/4, α = ln 3 (+ ln(K-1) = 0);
    row 0's weight triples: (3, 1, 1, 1)/6. Member 2 on (1/2, 1/6, 1/6, 1/6): the best stump
    splits at 1.5 and both leaves say poisonous: row 1 wrong, ε = 1/6, α = ln 5; row 1's
    weight times 5: (1/2, 5/6, 1/6, 1/6)/(5/3) = (3/10, 1/2, 1/10, 1/10).
    """
    table = pd.DataFrame(
        {
            "cap_width": [1.0, 2.0, 3.0, 4.0],
            "class": ["poisonous", "edible", "poisonous", "poisonous"],
        }
    )
    data = select_training_data(table_from_frame(table), "class")
    raw = {"kind": "adaboost", "params": {"n_estimators": 2}}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    fitted = train(data, spec, EvaluationSpec(holdout_fraction=0.0), 0)
    ada = fitted.pipeline[-1]
    assert ada.estimator_errors_ == pytest.approx([1 / 4, 1 / 6])
    assert ada.estimator_weights_ == pytest.approx([math.log(3), math.log(5)])
    block = fitted.metrics.hardest_rows
    assert block is not None
    assert [r["row"] for r in block["rows"]] == [1, 0, 2, 3]
    assert [r["weight"] for r in block["rows"]] == pytest.approx([0.5, 0.3, 0.1, 0.1])
    assert block["rows"][0] == {
        "row": 1,
        "weight": pytest.approx(0.5),
        "target": "edible",
        "predicted": "poisonous",  # ln 5 for poisonous everywhere beats ln 3 for edible
    }
    assert block["weight_share"] == pytest.approx(1.0)


def test_samme_replay_by_hand() -> None:
    wrong = np.array([[1, 0, 0, 0], [0, 1, 0, 0]], dtype=bool)
    found = replay_samme(wrong, n_classes=3, learning_rate=0.5)
    # ε1 = 1/4: α1 = 0.5 (ln 3 + ln 2) = 0.5 ln 6; row 0 times √6
    a1 = 0.5 * math.log(6)
    w = np.array([math.sqrt(6), 1, 1, 1]) / (math.sqrt(6) + 3)
    assert found.alphas[0] == pytest.approx(a1)
    assert found.seen[1] == pytest.approx(w)
    e2 = w[1]
    a2 = 0.5 * (math.log((1 - e2) / e2) + math.log(2))
    final = w * np.exp([0, a2, 0, 0])
    assert found.final == pytest.approx(final / final.sum())


class RecordingTree(DecisionTreeClassifier):
    """A stump that keeps a copy of the sample weights each fit receives."""

    seen: list[np.ndarray] = []  # noqa: RUF012 - shared by the clones AdaBoost makes

    def fit(self, X: Any, y: Any, sample_weight: Any = None, check_input: bool = True) -> Any:
        RecordingTree.seen.append(np.array(sample_weight, copy=True))
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)


@pytest.mark.parametrize("loader", [load_breast_cancer, load_wine], ids=["binary", "3 classes"])
def test_replay_equals_the_weights_scikit_learn_gave_each_member(loader: Any) -> None:
    X, y = loader(return_X_y=True)
    RecordingTree.seen = []
    ada = AdaBoostClassifier(
        RecordingTree(max_depth=1), n_estimators=25, learning_rate=0.8, random_state=0
    ).fit(X, y)
    found = replay(ada, X, y)
    assert len(found.seen) == len(RecordingTree.seen) == len(ada.estimators_)
    for mine, theirs in zip(found.seen, RecordingTree.seen, strict=True):
        np.testing.assert_array_equal(mine, theirs)
    assert found.alphas == pytest.approx(list(ada.estimator_weights_[: len(found.alphas)]))


@pytest.mark.parametrize("loss", ["linear", "square", "exponential"])
def test_r2_replay_equals_scikit_learn_errors_and_member_weights(loss: str) -> None:
    X, y = load_diabetes(return_X_y=True)
    ada = AdaBoostRegressor(
        DecisionTreeRegressor(max_depth=3), n_estimators=15, loss=loss, random_state=0
    ).fit(X, y)
    found = replay(ada, X, y)
    n = len(ada.estimators_)
    assert found.errors[:n] == pytest.approx(list(ada.estimator_errors_[:n]), rel=1e-12)
    assert found.alphas[:n] == pytest.approx(list(ada.estimator_weights_[:n]), rel=1e-12)
    assert found.final.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("dataset", "raw"),
    [
        ("breast_cancer", {"kind": "adaboost", "params": {"n_estimators": 30}}),
        ("diabetes", {"kind": "adaboost", "params": {"n_estimators": 10}}),
    ],
    ids=["classification", "regression"],
)
def test_rows_are_indices_of_the_uploaded_table(dataset: str, raw: dict[str, Any]) -> None:
    data = training_data(dataset)
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    fitted = train(data, spec, EvaluationSpec(holdout_fraction=0.3), 5)
    block = fitted.metrics.hardest_rows
    assert block is not None and len(block["rows"]) == 20
    table = frame(dataset)
    weights = [r["weight"] for r in block["rows"]]
    assert weights == sorted(weights, reverse=True)
    assert block["weight_share"] == pytest.approx(sum(weights))
    assert block["weight_share"] > block["uniform_share"]
    for r in block["rows"]:
        assert r["target"] == pytest.approx(table["target"].iloc[r["row"]])
        one = table.drop(columns="target").iloc[[r["row"]]]
        assert fitted.pipeline.predict(one)[0] == pytest.approx(r["predicted"])


def test_other_kinds_have_none_and_no_note_about_them() -> None:
    """Hardest rows never apply to bagging: a note would explain nothing (issue 20)."""
    data = training_data("wine")
    spec = resolve_ensemble(parse_estimator_spec({"kind": "bagging"}), data.task)
    fitted = train(data, spec, EvaluationSpec(), 0)
    assert fitted.metrics.hardest_rows is None
    assert not any(n.startswith("no hardest rows:") for n in fitted.metrics.notes)
