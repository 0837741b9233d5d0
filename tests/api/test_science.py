"""The science blocks of a version's metrics through the API, and the submit-time checks of
``evaluation.bias_variance``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.settings import Settings
from tests.api.conftest import started
from tests.api.support import Api, forest


async def _refused(api: Api, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = await api.submit("m", body)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "invalid_spec"
    assert (await api.client.get("/v1/jobs")).json() == []
    errors: list[dict[str, Any]] = problem["errors"]
    return errors


async def test_bias_variance_rounds_above_the_setting_422(
    settings_for: Callable[..., Settings],
) -> None:
    async for _, api in started(settings_for(max_bias_variance_rounds=5)):
        dataset = await api.iris()
        body = forest(dataset, evaluation={"bias_variance": {"rounds": 6}})
        [error] = await _refused(api, body)
        assert error["loc"] == ["evaluation", "bias_variance", "rounds"]
        assert "at most 5" in error["msg"]


async def test_bias_variance_without_a_hold_out_422(api: Api) -> None:
    dataset = await api.iris()
    evaluation = {"holdout_fraction": 0, "bias_variance": {"rounds": 3}}
    [error] = await _refused(api, forest(dataset, evaluation=evaluation))
    assert error["loc"] == ["evaluation", "bias_variance"]
    assert "holdout_fraction" in error["msg"]


async def test_a_version_shows_diversity_curves_and_bias_variance(api: Api) -> None:
    dataset = await api.iris()
    body = forest(dataset, evaluation={"holdout_fraction": 0.2, "bias_variance": {"rounds": 3}})
    response = await api.submit("iris-rf", body, wait=True)
    assert response.status_code == 201, response.text
    metrics = response.json()["metrics"]
    assert metrics["diversity"]["evaluated_on"] == "holdout"
    assert set(metrics["diversity"]["pairwise"]) == {
        "disagreement", "q_statistic", "correlation", "double_fault", "kappa",
    }  # fmt: skip
    assert len(metrics["diversity"]["matrices"]["kappa"]) == 10
    assert set(metrics["diversity"]["condorcet"]) >= {
        "mean_member_accuracy", "n_members", "independent_majority_accuracy", "ensemble_accuracy",
    }  # fmt: skip
    [curve] = metrics["curves"]
    assert curve.keys() == {"name", "x_label", "x", "y_label", "y"}
    assert curve["x"] == [p["n_estimators"] for p in metrics["curve"]["points"]]
    assert metrics["bias_variance"]["rounds"] == 3
    assert metrics["bias_variance"]["member_spec"]["kind"] == "decision_tree"
    assert metrics["oof"] is None and metrics["hardest_rows"] is None
    # A forest never has hardest rows nor out-of-fold scores: no note about them (issue 20).
    assert not [n for n in metrics["notes"] if n.startswith(("no hardest rows", "no out-of-fold"))]
