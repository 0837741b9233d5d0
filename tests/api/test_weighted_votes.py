"""Votes of weighted voting models: `votes` counts each member once, `weighted_votes` holds
the weighted tallies, `agreement` is the predicted class's share of the weighted tally,
and the predictions (default or a hard override) follow the weights as scikit-learn's do."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import joblib
import numpy as np
import pytest
import pytest_asyncio

from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, iris_frame, records

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

LR_RF_NB = [
    {"name": "lr", "kind": "logistic_regression", "params": {"max_iter": 500}},
    {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 10}},
    {"name": "nb", "kind": "gaussian_nb"},
]
# A stump cannot tell versicolor from virginica: with weight 3 it outvotes lr and nb (2)
# wherever they agree on the class it does not predict.
STUMP_LR_NB = [
    {"name": "stump", "kind": "decision_tree", "params": {"max_depth": 1}},
    *LR_RF_NB[::2],
]
MODELS: dict[str, dict[str, Any]] = {
    "hard-211": {"voting": "hard", "weights": [2, 1, 1], "estimators": LR_RF_NB},
    "soft-211": {"voting": "soft", "weights": [2, 1, 1], "estimators": LR_RF_NB},
    "hard-unweighted": {"voting": "hard", "estimators": LR_RF_NB},
    "stump-311": {"voting": "hard", "weights": [3, 1, 1], "estimators": STUMP_LR_NB},
}
ROWS = iris_frame().reset_index(drop=True)  # every row: the stump's mistakes are among them


class Served:
    def __init__(self, api: Api) -> None:
        self.api = api

    async def votes(self, model: str, **options: Any) -> dict[str, Any]:
        body = {"instances": records(ROWS, IRIS_FEATURES), "options": options}
        response = await self.api.predict(model, 1, body)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    async def stored(self, model: str) -> Any:
        artifact = await self.api.client.get(f"/v1/models/{model}/versions/1/artifact")
        return joblib.load(io.BytesIO(artifact.content))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    settings = make_settings(tmp_path_factory.mktemp("weighted"), max_concurrent_jobs=2)
    async for _, api in started(settings):
        iris = await api.upload_frame(iris_frame(), "iris")
        jobs = []
        for model, voting in MODELS.items():
            params = {k: v for k, v in voting.items() if k != "estimators"}
            ensemble = {"kind": "voting", "params": params, "estimators": voting["estimators"]}
            body = {"dataset_id": iris, "target": "species", "ensemble": ensemble}
            response = await api.submit(model, {**body, "random_state": 3})
            assert response.status_code == 202, response.text
            jobs.append(response.json()["id"])
        for job_id in jobs:
            job = await api.wait_job(job_id, timeout=120)
            assert job["status"] == "succeeded", job
        yield Served(api)


def member_counts(pipeline: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(members per row and class, weighted tallies) straight from the stored estimators."""
    ensemble = pipeline[-1]
    Xt = pipeline[:-1].transform(ROWS[IRIS_FEATURES])
    picks = np.array([est.predict(Xt) for est in ensemble.estimators_]).T.astype(int)
    k = len(ensemble.classes_)
    weights = ensemble.weights or [1] * len(picks[0])
    counts = np.array([np.bincount(row, minlength=k) for row in picks])
    tallies = np.array([np.bincount(row, weights=weights, minlength=k) for row in picks])
    return counts, tallies


@pytest.mark.parametrize("model", ["hard-211", "soft-211"])
async def test_votes_count_members_and_weighted_votes_hold_the_tallies(
    served: Served, model: str
) -> None:
    answer = await served.votes(model, return_votes=True)
    pipeline = await served.stored(model)
    classes = answer["classes"]
    assert answer["predictions"] == pipeline.predict(ROWS[IRIS_FEATURES]).tolist()
    counts, tallies = member_counts(pipeline)
    assert len(answer["votes"]) == len(answer["weighted_votes"]) == len(ROWS)
    for i, (votes, weighted, agreement, label) in enumerate(
        zip(
            answer["votes"],
            answer["weighted_votes"],
            answer["agreement"],
            answer["predictions"],
            strict=True,
        )
    ):
        assert all(type(v) is int for v in [*votes.values(), *weighted.values()])
        assert sum(votes.values()) == 3 and sum(weighted.values()) == 4
        assert votes == {classes[j]: int(c) for j, c in enumerate(counts[i]) if c}
        assert weighted == {c: int(tallies[i][classes.index(c)]) for c in votes}
        assert agreement == weighted.get(label, 0) / 4


async def test_a_hard_override_of_a_weighted_soft_vote_is_scikit_learns_weighted_hard_vote(
    served: Served,
) -> None:
    answer = await served.votes("soft-211", voting="hard", return_votes=True)
    pipeline = await served.stored("soft-211")
    pipeline[-1].voting = "hard"  # scikit-learn's own hard vote of the same members
    assert answer["predictions"] == pipeline.predict(ROWS[IRIS_FEATURES]).tolist()
    assert all(sum(v.values()) == 3 for v in answer["votes"])
    assert all(sum(v.values()) == 4 for v in answer["weighted_votes"])


async def test_the_prediction_follows_the_weights_where_the_head_count_disagrees(
    served: Served,
) -> None:
    answer = await served.votes("stump-311", return_votes=True)
    pipeline = await served.stored("stump-311")
    assert answer["predictions"] == pipeline.predict(ROWS[IRIS_FEATURES]).tolist()
    outvoted = [
        i
        for i, (votes, label) in enumerate(zip(answer["votes"], answer["predictions"], strict=True))
        if votes.get(label) == 1 and max(votes.values()) == 2
    ]
    assert len(outvoted) >= 5  # the stump (3) against lr and nb (1 + 1)
    for i in outvoted:
        label = answer["predictions"][i]
        (other,) = set(answer["votes"][i]) - {label}
        assert answer["votes"][i] == {label: 1, other: 2}
        assert answer["weighted_votes"][i] == {label: 3, other: 2}
        assert answer["agreement"][i] == 0.6


async def test_an_unweighted_model_has_votes_and_no_weighted_votes(served: Served) -> None:
    answer = await served.votes("hard-unweighted", return_votes=True)
    pipeline = await served.stored("hard-unweighted")
    counts, _ = member_counts(pipeline)
    classes = answer["classes"]
    assert "weighted_votes" not in answer
    assert answer["votes"] == [
        {classes[j]: int(c) for j, c in enumerate(row) if c} for row in counts
    ]
    assert answer["agreement"] == [
        row[classes.index(label)] / 3
        for row, label in zip(counts, answer["predictions"], strict=True)
    ]
    plain = await served.votes("hard-211")  # without return_votes: none of them
    assert not {"votes", "weighted_votes", "agreement"} & set(plain)
