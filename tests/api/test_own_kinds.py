"""pasting_votes and ensemble_selection through the service: trained by a worker, their
metrics in the version, served with votes, agreement and a per-request voting override,
downloaded as a plain scikit-learn artifact, and refused at submit time with the field."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import joblib
import numpy as np
import pytest
import pytest_asyncio
from sklearn.ensemble import VotingClassifier

from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, diabetes_frame, iris_frame, locs, records

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

LIBRARY = [
    {"name": "lr", "kind": "logistic_regression", "params": {"max_iter": 1000}},
    {"name": "stump", "kind": "decision_tree", "params": {"max_depth": 1}},
    {"name": "nb", "kind": "gaussian_nb"},
    {"name": "knn", "kind": "knn", "params": {"n_neighbors": 10}},
]
ROWS = iris_frame().reset_index(drop=True)
DIABETES_FEATURES = [c for c in diabetes_frame().columns if c != "progression"]


class Served:
    def __init__(self, api: Api, iris: str, diabetes: str) -> None:
        self.api, self.iris, self.diabetes = api, iris, diabetes

    async def version(self, model: str) -> dict[str, Any]:
        response = await self.api.client.get(f"/v1/models/{model}/versions/1")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def predict(self, model: str, **options: Any) -> dict[str, Any]:
        frame, features = (
            (diabetes_frame(), DIABETES_FEATURES) if model == "pv-reg" else (ROWS, IRIS_FEATURES)
        )
        body = {"instances": records(frame, features), "options": options}
        response = await self.api.predict(model, 1, body)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    async def stored(self, model: str) -> Any:
        artifact = await self.api.client.get(f"/v1/models/{model}/versions/1/artifact")
        assert artifact.status_code == 200
        return joblib.load(io.BytesIO(artifact.content))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    settings = make_settings(tmp_path_factory.mktemp("own-kinds"), max_concurrent_jobs=2)
    async for _, api in started(settings):
        iris = await api.upload_frame(iris_frame(), "iris")
        diabetes = await api.upload_frame(diabetes_frame(), "diabetes")
        bodies = {
            "pv": {
                "dataset_id": iris,
                "target": "species",
                "ensemble": {
                    "kind": "pasting_votes",
                    "params": {"bite_size": 30, "max_estimators": 25, "patience": 8},
                },
            },
            "es": {
                "dataset_id": iris,
                "target": "species",
                "ensemble": {
                    "kind": "ensemble_selection",
                    "params": {"metric": "log_loss", "max_steps": 10, "cv": 3},
                    "estimators": LIBRARY,
                },
            },
            "pv-reg": {
                "dataset_id": diabetes,
                "target": "progression",
                "ensemble": {
                    "kind": "pasting_votes",
                    "params": {"bite_size": 100, "max_estimators": 15},
                    "estimator": {"kind": "decision_tree", "params": {"max_depth": 4}},
                },
            },
        }
        jobs = []
        for model, body in bodies.items():
            response = await api.submit(model, {**body, "random_state": 5})
            assert response.status_code == 202, response.text
            jobs.append(response.json()["id"])
        for job_id in jobs:
            job = await api.wait_job(job_id, timeout=180)
            assert job["status"] == "succeeded", job
        yield Served(api, iris, diabetes)


async def test_pasting_votes_versions_report_the_oob_curve_and_why_growth_stopped(
    served: Served,
) -> None:
    version = await served.version("pv")
    assert version["kind"] == "pasting_votes"
    assert version["spec"]["params"]["sampling"] == "importance"
    metrics = version["metrics"]
    stopping = metrics["stopping"]
    assert stopping["reason"] in ("patience", "max_estimators", "zero_error")
    assert stopping["n_estimators"] == version["training"]["n_estimators"]
    curve = next(c for c in metrics["curves"] if c["name"] == "oob_error")
    assert curve["x_label"] == "members" and len(curve["y"]) == stopping["n_estimators"]
    assert metrics["oob"]["n_scored"] > 0
    assert metrics["selection"] is None


async def test_ensemble_selection_versions_report_the_selection(served: Served) -> None:
    metrics = (await served.version("es"))["metrics"]
    selection = metrics["selection"]
    assert set(selection["member_oof"]) == {"lr", "stump", "nb", "knn"}
    assert selection["weights"] and set(selection["weights"]) <= set(selection["member_oof"])
    assert selection["ensemble_oof"] <= min(selection["member_oof"].values())  # log loss
    (curve,) = metrics["curves"]
    assert curve["name"] == "selection" and curve["x"] == list(range(11))
    assert metrics["stopping"] is None


async def test_pasting_votes_serves_hard_votes_and_a_soft_override(served: Served) -> None:
    stored = await served.stored("pv")
    ensemble = stored[-1]
    assert type(ensemble) is VotingClassifier and ensemble.voting == "hard"
    n = len(ensemble.estimators_)
    answer = await served.predict("pv", return_votes=True)
    assert answer["predictions"] == list(stored.predict(ROWS[IRIS_FEATURES]))
    assert all(sum(v.values()) == n for v in answer["votes"])
    assert "weighted_votes" not in answer or answer["weighted_votes"] is None
    for votes, label, agreement in zip(
        answer["votes"], answer["predictions"], answer["agreement"], strict=True
    ):
        assert agreement == pytest.approx(votes[label] / n)
    soft = await served.predict("pv", voting="soft", return_proba=True)
    Xt = stored[:-1].transform(ROWS[IRIS_FEATURES])
    proba = np.zeros((len(ROWS), 3))
    for member in ensemble.estimators_:
        proba[:, member.classes_.astype(int)] += member.predict_proba(Xt)
    proba /= n
    np.testing.assert_allclose(soft["probabilities"], proba, rtol=0, atol=1e-12)
    assert soft["predictions"] == list(ensemble.classes_[np.argmax(proba, axis=1)])


async def test_pasting_votes_gives_no_probabilities_without_the_soft_override(
    served: Served,
) -> None:
    body = {"instances": records(ROWS.iloc[:2], IRIS_FEATURES), "options": {"return_proba": True}}
    response = await served.api.predict("pv", 1, body)
    assert response.status_code == 422
    assert locs(response) == [["options", "return_proba"]]
    assert "hard voting" in response.text


async def test_ensemble_selection_serves_weighted_votes(served: Served) -> None:
    stored = await served.stored("es")
    ensemble = stored[-1]
    weights = dict(zip([n for n, _ in ensemble.estimators], ensemble.weights, strict=True))
    answer = await served.predict("es", return_votes=True, return_proba=True)
    assert answer["predictions"] == list(stored.predict(ROWS[IRIS_FEATURES]))
    np.testing.assert_allclose(
        answer["probabilities"], stored.predict_proba(ROWS[IRIS_FEATURES]), rtol=0, atol=1e-9
    )
    Xt = stored[:-1].transform(ROWS[IRIS_FEATURES])
    labels = {n: ensemble.classes_[m.predict(Xt)] for n, m in ensemble.named_estimators_.items()}
    total = sum(weights.values())
    for i, (votes, label) in enumerate(zip(answer["votes"], answer["predictions"], strict=True)):
        assert sum(votes.values()) == len(weights)  # each member once
        tally = sum(w for n, w in weights.items() if labels[n][i] == label)
        assert answer["agreement"][i] == pytest.approx(tally / total)
    assert any(w != 1 for w in weights.values())  # this library's selection repeats members
    assert all(sum(w.values()) == total for w in answer["weighted_votes"])
    hard = await served.predict("es", voting="hard")
    tallies = np.zeros((len(ROWS), 3))
    for name, weight in weights.items():
        tallies[np.arange(len(ROWS)), ensemble.named_estimators_[name].predict(Xt)] += weight
    assert hard["predictions"] == list(ensemble.classes_[np.argmax(tallies, axis=1)])


async def test_pasting_votes_regression_serves_the_members_spread(served: Served) -> None:
    stored = await served.stored("pv-reg")
    answer = await served.predict("pv-reg", return_std=True)
    X = diabetes_frame()[DIABETES_FEATURES]
    np.testing.assert_allclose(answer["predictions"], stored.predict(X), rtol=0, atol=1e-9)
    Xt = stored[:-1].transform(X)
    members = np.stack([m.predict(Xt) for m in stored[-1].estimators_])
    np.testing.assert_allclose(answer["std"], members.std(axis=0), rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("ensemble", "loc", "says"),
    [
        (
            {"kind": "pasting_votes", "params": {"bite_size": 500}},
            ["ensemble", "params", "bite_size"],
            "set bite_size to at most 119",
        ),
        (
            {"kind": "ensemble_selection", "params": {"metric": "rmse"}, "estimators": LIBRARY},
            ["ensemble", "params", "metric"],
            "'rmse' is for regression only",
        ),
        (
            {"kind": "ensemble_selection", "estimators": []},
            ["ensemble", "estimators"],
            "needs at least one estimator",
        ),
        (
            {"kind": "pasting_votes", "params": {"patience": 0}},
            ["ensemble", "params", "patience"],
            "must be an integer >= 1",
        ),
    ],
    ids=["bite_size", "metric", "empty_library", "patience"],
)
async def test_bad_specs_are_refused_at_submit_time(
    served: Served, ensemble: dict[str, Any], loc: list[Any], says: str
) -> None:
    body = {"dataset_id": served.iris, "target": "species", "ensemble": ensemble}
    response = await served.api.submit("refused", body)
    assert response.status_code == 422, response.text
    assert loc in locs(response)
    assert says in response.text
