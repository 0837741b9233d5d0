"""Diversity measures, the Condorcet check and the ambiguity decomposition against cases
worked out by hand, the identities of Kuncheva & Whitaker (2003), and every kind trained."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from ensembles.catalog import KINDS
from ensembles.science import diversity as div
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.kinds import SPECS
from tests.unit.datasets import training_data


def two_members() -> tuple[np.ndarray, np.ndarray]:
    """Ten rows: both right on 4, only the first on 2, only the second on 1, both wrong on 3.
    Every row's class is 0 and a wrong member says 1."""
    first = np.array([1, 1, 1, 1, 1, 1, 0, 0, 0, 0], dtype=bool)
    second = np.array([1, 1, 1, 1, 0, 0, 1, 0, 0, 0], dtype=bool)
    correct = np.stack([first, second])
    return correct, (~correct).astype(np.int64)


def test_pairwise_measures_of_a_2x2_table() -> None:
    correct, labels = two_members()
    valid = np.ones_like(correct)
    assert [float(m[0, 1]) for m in div.pair_counts(correct, valid)] == [4, 2, 1, 3]
    m = div.pairwise_matrices(correct, labels, valid, 2)
    assert m["q_statistic"][0, 1] == pytest.approx((4 * 3 - 1 * 2) / (4 * 3 + 1 * 2))  # 5/7
    assert m["correlation"][0, 1] == pytest.approx(10 / math.sqrt(6 * 4 * 5 * 5))
    assert m["disagreement"][0, 1] == pytest.approx(3 / 10)
    assert m["double_fault"][0, 1] == pytest.approx(3 / 10)
    # θ1 = 7/10 (both right, or both wrong and so both say 1); θ2 = .6·.5 + .4·.5 = .5
    assert m["kappa"][0, 1] == pytest.approx((0.7 - 0.5) / (1 - 0.5))
    assert m["kappa"][0, 1] == pytest.approx(cohen_kappa_score(labels[0], labels[1]))
    assert np.allclose(m["q_statistic"], m["q_statistic"].T)


def test_non_pairwise_measures_by_hand() -> None:
    correct = np.array([[1, 1, 0, 1], [1, 0, 0, 1], [1, 1, 1, 0]], dtype=bool)
    # l_j = 3, 2, 1, 2 of L = 3 members; p̄ = 8/12
    out = div.non_pairwise(correct, np.ones_like(correct))
    assert out["entropy"] == pytest.approx((0 + 1 + 1 + 1) / 4 / (3 - 2))
    assert out["kw_variance"] == pytest.approx((0 + 2 + 2 + 2) / (4 * 9))
    p = 8 / 12
    assert out["interrater_agreement"] == pytest.approx(1 - (6 / 3) / (4 * 2 * p * (1 - p)))
    assert out["interrater_agreement"] == pytest.approx(-1 / 8)


def test_kuncheva_whitaker_identities_on_random_members() -> None:
    """KW = (L-1)/(2L)·D_av and κ = 1 - L/((L-1)p̄(1-p̄))·KW hold exactly on full rows."""
    rng = np.random.RandomState(0)
    correct = rng.rand(7, 300) < 0.7
    labels = np.where(correct, 0, rng.randint(1, 3, correct.shape))
    valid = np.ones_like(correct)
    block = div.diversity(
        correct,
        labels,
        valid,
        3,
        names=[str(i) for i in range(7)],
        n_members_total=7,
        ensemble_accuracy=None,
    )
    n_members = 7
    d_av = block["pairwise"]["disagreement"]
    assert block["kw_variance"] == pytest.approx((n_members - 1) / (2 * n_members) * d_av)
    p = correct.mean()
    expected = 1 - n_members / ((n_members - 1) * p * (1 - p)) * block["kw_variance"]
    assert block["interrater_agreement"] == pytest.approx(expected)
    assert len(block["matrices"]["kappa"]) == 7
    assert block["pairs"] == {"total": 21, "undefined": dict.fromkeys(div.PAIRWISE, 0)}


def test_undefined_values_are_none_never_nan() -> None:
    always = np.ones(6, dtype=bool)
    sometimes = np.array([1, 0, 1, 0, 1, 1], dtype=bool)
    correct = np.stack([always, sometimes])
    labels = np.zeros((2, 6), dtype=np.int64)  # both always say class 0
    block = div.diversity(
        correct,
        labels,
        np.ones_like(correct),
        2,
        names=["a", "b"],
        n_members_total=2,
        ensemble_accuracy=1.0,
    )
    # N01 = N00 = 0: Q and ρ are 0/0; both always say 0: κ's chance agreement is 1.
    assert block["pairwise"]["q_statistic"] is None
    assert block["pairwise"]["correlation"] is None
    assert block["pairwise"]["kappa"] is None
    assert block["pairs"]["undefined"]["q_statistic"] == 1
    assert block["matrices"]["q_statistic"][0][1] is None
    assert block["pairwise"]["double_fault"] == 0.0
    perfect = div.non_pairwise(np.ones((3, 5), dtype=bool), np.ones((3, 5), dtype=bool))
    assert perfect == {"entropy": 0.0, "kw_variance": 0.0, "interrater_agreement": 1.0}


def test_out_of_bag_cells_compare_pairs_on_common_rows() -> None:
    correct, labels = two_members()
    valid = np.ones_like(correct)
    valid[0, 5:] = False  # the first member trained on rows 5..9
    m = div.pairwise_matrices(correct, labels, valid, 2)
    sub = div.pairwise_matrices(correct[:, :5], labels[:, :5], valid[:, :5], 2)
    for name in div.PAIRWISE:
        assert m[name][0, 1] == pytest.approx(sub[name][0, 1], nan_ok=True)
    apart = np.array([[1, 1, 0, 0], [0, 0, 1, 1]], dtype=bool)  # no row out of bag for both
    empty = div.pairwise_matrices(correct[:, :4], labels[:, :4], apart, 2)
    assert all(math.isnan(empty[name][0, 1]) for name in div.PAIRWISE)


def test_condorcet_binomial_majority() -> None:
    assert div.majority_accuracy(1, 0.6) == pytest.approx(0.6)
    assert div.majority_accuracy(3, 0.6) == pytest.approx(3 * 0.36 * 0.4 + 0.216)  # 0.648
    assert div.majority_accuracy(2, 0.6) == pytest.approx(0.36 + 0.5 * 2 * 0.6 * 0.4)  # ties
    block = div.condorcet(0.6, 5, 0.7)
    assert [p["n_members"] for p in block["by_members"]] == [1, 2, 3, 4, 5]
    assert block["independent_majority_accuracy"] == pytest.approx(
        sum(math.comb(5, k) * 0.6**k * 0.4 ** (5 - k) for k in (3, 4, 5))
    )
    assert len(div.condorcet(0.6, 500, None)["by_members"]) == 50


def test_ambiguity_by_hand() -> None:
    values = np.array([[1.0, 2.0], [3.0, 6.0]])
    y = np.array([2.0, 3.0])
    out = div.ambiguity(values, y, np.ones_like(values, dtype=bool))
    # f̄ = (2, 4): ensemble (0 + 1)/2; members ((1 + 1)/2 + (1 + 9)/2)/2; spread (1 + 4)/2
    assert (out["ensemble_mse"], out["mean_member_mse"], out["ambiguity"]) == pytest.approx(
        (0.5, 3.0, 2.5)
    )
    weighted = div.ambiguity(values, y, np.ones_like(values, dtype=bool), np.array([3.0, 1.0]))
    combined = 0.75 * values[0] + 0.25 * values[1]
    assert weighted["ensemble_mse"] == pytest.approx(np.mean((combined - y) ** 2))
    assert weighted["ensemble_mse"] == pytest.approx(
        weighted["mean_member_mse"] - weighted["ambiguity"]
    )


ENSEMBLES = [
    pytest.param(kind, task, id=f"{kind}-{task}")
    for (kind, task) in SPECS
    if KINDS[kind].family == "ensemble"
]


@pytest.mark.parametrize(("kind", "task"), ENSEMBLES)
@pytest.mark.parametrize("holdout", [0.25, 0.0], ids=["holdout", "no-holdout"])
def test_every_kind_has_diversity_or_says_why(kind: str, task: str, holdout: float) -> None:
    data = training_data("wine" if task == "classification" else "diabetes")
    spec = resolve_ensemble(parse_estimator_spec(SPECS[(kind, task)]), data.task)
    fitted = train(data, spec, EvaluationSpec(holdout_fraction=holdout), 3)
    m = fitted.metrics
    block, name = (
        (m.diversity, "diversity") if task == "classification" else (m.ambiguity, "ambiguity")
    )
    if block is None:  # explained unless no fit of the kind has one (boosting's stages)
        explained = any(n.startswith(f"no {name}:") for n in m.notes)
        assert explained == (KINDS[kind].members != "none"), m.notes
        assert KINDS[kind].members == "none" or holdout == 0.0
        return
    assert block["evaluated_on"] == ("holdout" if holdout else block["evaluated_on"])
    assert block["evaluated_on"] in ("holdout", "oob", "oof")
    if name == "ambiguity":
        assert block["ensemble_mse"] == pytest.approx(block["mean_member_mse"] - block["ambiguity"])
        assert block["ambiguity"] >= 0
    else:
        assert set(block["pairwise"]) == set(div.PAIRWISE)
        assert 0 <= block["kw_variance"] <= 0.25
        assert block["condorcet"]["ensemble_accuracy"] is not None


def test_hold_out_diversity_of_a_forest_and_its_ensemble_accuracy() -> None:
    data = training_data("breast_cancer")
    raw = {"kind": "random_forest", "params": {"n_estimators": 60}}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    fitted = train(data, spec, EvaluationSpec(holdout_fraction=0.3), 0)
    block = fitted.metrics.diversity
    assert block is not None and block["evaluated_on"] == "holdout"
    assert block["matrices"] is None  # more than 50 members: means only
    condorcet = block["condorcet"]
    assert condorcet["n_members"] == 60
    assert condorcet["ensemble_accuracy"] == fitted.metrics.holdout["accuracy"]
    # The forest's members are correlated: independent members would do better still.
    assert condorcet["independent_majority_accuracy"] > condorcet["mean_member_accuracy"]
    assert condorcet["ensemble_accuracy"] > condorcet["mean_member_accuracy"]
