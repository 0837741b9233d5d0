"""Bias–variance decompositions: hand-worked cases, the exact identities, and the seed's
two claims on real data (bagging cuts variance, boosting cuts bias), with fixed seeds."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from ensembles.errors import TrainingCancelledError, TrainingError
from ensembles.science import bias_variance as bv
from ensembles.specs import BiasVarianceSpec, EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data


def test_squared_loss_by_hand() -> None:
    preds = np.array([[1.0, 4.0], [3.0, 6.0]])  # 2 rounds x 2 rows
    y = np.array([1.0, 5.0])
    out = bv.squared(preds, y)
    # row 0: mean 2, bias² 1, variance 1; row 1: mean 5, bias² 0, variance 1
    assert out == pytest.approx({"loss": 1.5, "bias": 0.5, "variance": 1.0})


def test_domingos_zero_one_by_hand() -> None:
    # 4 rounds x 3 rows, 3 classes; truth 0, 1, 2
    preds = np.array([[0, 0, 1], [0, 2, 1], [1, 2, 2], [0, 2, 0]])
    y = np.array([0, 1, 2])
    out = bv.zero_one(preds, y, 3)
    # row 0: main 0 = y, unbiased, V = 1/4, L = 1/4
    # row 1: main 2 != 1, biased, V = P(f != 2) = 1/4, L = 1, P(f = y) = 0
    # row 2: counts 0:1, 1:2, 2:1 -> main 1 != 2, biased, V = 1/2, L = 3/4, P(f = y) = 1/4
    assert out["bias"] == pytest.approx(2 / 3)
    assert out["variance"] == pytest.approx((1 / 4 + 1 / 4 + 1 / 2) / 3)
    assert out["loss"] == pytest.approx((1 / 4 + 1 + 3 / 4) / 3)
    assert out["net_variance"] == pytest.approx((1 / 4 - 0 - 1 / 4) / 3)
    assert out["loss"] == pytest.approx(out["bias"] + out["net_variance"])
    assert out["variance_unbiased"] + out["variance_biased"] == pytest.approx(out["variance"])


def test_ties_of_the_main_prediction_go_to_the_first_class() -> None:
    out = bv.zero_one(np.array([[1], [0]]), np.array([1]), 2)
    assert out["bias"] == 1.0  # main prediction 0 (first class), truth 1


def test_identities_on_random_predictions() -> None:
    rng = np.random.RandomState(1)
    preds = rng.randint(0, 4, (9, 200))
    y = rng.randint(0, 4, 200)
    out = bv.zero_one(preds, y, 4)
    assert out["loss"] == pytest.approx(out["bias"] + out["net_variance"])
    values = rng.normal(size=(9, 200))
    target = rng.normal(size=200)
    sq = bv.squared(values, target)
    assert sq["loss"] == pytest.approx(sq["bias"] + sq["variance"])


def _decompose(dataset: str, raw: dict[str, Any], rounds: int, **kw: Any) -> dict[str, Any]:
    data = training_data(dataset)
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    evaluation = EvaluationSpec(holdout_fraction=0.3, bias_variance=BiasVarianceSpec(rounds=rounds))
    fitted = train(data, spec, evaluation, 0, **kw)
    block = fitted.metrics.bias_variance
    assert block is not None
    assert "bias_variance_s" in fitted.training
    return block


def test_bagging_cuts_the_variance_of_its_tree() -> None:
    raw = {"kind": "bagging", "params": {"n_estimators": 15}}
    block = _decompose("breast_cancer", raw, 8)
    assert block["loss"] == "zero_one" and block["rounds"] == 8
    assert block["member_spec"]["kind"] == "decision_tree"
    assert block["ensemble"]["variance"] < block["single_member"]["variance"]
    for part in ("ensemble", "single_member"):
        assert block[part]["loss"] == pytest.approx(
            block[part]["bias"] + block[part]["net_variance"]
        )


def test_boosting_cuts_the_bias_of_its_stump() -> None:
    raw = {"kind": "adaboost", "params": {"n_estimators": 30}}
    block = _decompose("breast_cancer", raw, 6)
    assert block["member_spec"]["params"]["max_depth"] == 1
    assert block["ensemble"]["bias"] < block["single_member"]["bias"]


def test_regression_forest_against_a_tree_with_its_parameters() -> None:
    raw = {"kind": "random_forest", "params": {"n_estimators": 20, "max_features": 0.5}}
    block = _decompose("diabetes", raw, 6)
    assert block["loss"] == "squared"
    assert block["member_spec"]["params"]["max_features"] == 0.5
    assert "forest" in block["member_note"]
    ens, tree = block["ensemble"], block["single_member"]
    assert ens["loss"] == pytest.approx(ens["bias"] + ens["variance"])
    assert ens["variance"] < tree["variance"]
    assert "noise" not in ens  # one target per row: the noise is inside the bias


def test_member_specs() -> None:
    def spec(raw: dict[str, Any], task: Any = "classification") -> Any:
        return bv.member_spec(resolve_ensemble(parse_estimator_spec(raw), task), task)

    member, note = spec({"kind": "extra_trees", "params": {"max_depth": 4}})
    assert member.params["splitter"] == "random" and member.params["max_depth"] == 4
    member, note = spec({"kind": "voting", "estimators": [{"name": "nb", "kind": "gaussian_nb"}]})
    assert member.kind == "gaussian_nb" and note == "the first member, 'nb'"
    member, _ = spec({"kind": "gradient_boosting", "params": {"max_depth": 2}}, "regression")
    assert member.kind == "decision_tree" and member.params["max_depth"] == 2


def test_progress_and_cancel_during_rounds() -> None:
    seen: list[tuple[int, int, str]] = []
    cancel = threading.Event()

    def progress(done: int, total: int, stage: str) -> None:
        seen.append((done, total, stage))
        if stage == "bias_variance" and done == 2:
            cancel.set()

    with pytest.raises(TrainingCancelledError):
        _decompose(
            "wine",
            {"kind": "bagging", "params": {"n_estimators": 3}},
            5,
            on_progress=progress,
            cancel=cancel,
        )
    assert [d for d, _, s in seen if s == "bias_variance"] == [0, 1, 2]


def test_needs_a_hold_out_and_a_bounded_number_of_rounds() -> None:
    asked = BiasVarianceSpec(rounds=80)
    problems = bv.problems(EvaluationSpec(holdout_fraction=0.0, bias_variance=asked), 50)
    assert [p.loc for p in problems] == [
        ("evaluation", "bias_variance", "rounds"),
        ("evaluation", "bias_variance"),
    ]
    data = training_data("wine")
    spec = resolve_ensemble(parse_estimator_spec({"kind": "bagging"}), data.task)
    evaluation = EvaluationSpec(holdout_fraction=0.0, bias_variance=BiasVarianceSpec(rounds=3))
    with pytest.raises(TrainingError) as caught:
        train(data, spec, evaluation, 0)
    assert caught.value.problems[0].loc == ("evaluation", "bias_variance")
