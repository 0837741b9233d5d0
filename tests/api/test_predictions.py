"""Predictions through the API equal the stored model's, for every ensemble kind."""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import AsyncIterator
from typing import Any

import joblib
import numpy as np
import pytest
import pytest_asyncio

from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, diabetes_frame, iris_frame, locs, records
from tests.kinds import SPECS, cases, entries

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

DIABETES_FEATURES = [c for c in diabetes_frame().columns if c != "progression"]


class Trained:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.versions: dict[tuple[str, str], dict[str, Any]] = {}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def trained(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Trained]:
    """Every ensemble kind of the shared table for both tasks, trained once, two jobs at a
    time."""
    settings = make_settings(tmp_path_factory.mktemp("predictions"), max_concurrent_jobs=2)
    async for _, api in started(settings):
        iris = await api.upload_frame(iris_frame(), "iris")
        diabetes = await api.upload_frame(diabetes_frame(), "diabetes")
        jobs: dict[tuple[str, str], str] = {}
        for kind, task in entries("ensemble"):
            body = {
                "dataset_id": iris if task == "classification" else diabetes,
                "target": "species" if task == "classification" else "progression",
                "ensemble": SPECS[(kind, task)],
                "random_state": 7,
            }
            response = await api.submit(f"{task[:3]}-{kind}", body)
            assert response.status_code == 202, response.text
            jobs[(task, kind)] = response.json()["id"]
        result = Trained(api)
        for case, job_id in jobs.items():
            job = await api.wait_job(job_id, timeout=120)
            assert job["status"] == "succeeded", job
            version = await api.client.get(f"/v1/models/{job['model']}/versions/{job['version']}")
            result.versions[case] = version.json()
        yield result


async def _stored(api: Api, model: str) -> Any:
    artifact = await api.client.get(f"/v1/models/{model}/versions/latest/artifact")
    return joblib.load(io.BytesIO(artifact.content))


@pytest.mark.parametrize(("kind", "task"), cases("ensemble"))
async def test_predictions_equal_the_stored_model(trained: Trained, task: str, kind: str) -> None:
    api = trained.api
    model = trained.versions[(task, kind)]["model"]
    if task == "classification":
        frame, features = iris_frame().sample(40, random_state=1), IRIS_FEATURES
    else:
        frame, features = diabetes_frame().sample(40, random_state=1), DIABETES_FEATURES
    pipeline = await _stored(api, model)
    # Probabilities wherever the model gives them (pasting_votes is a hard vote: none).
    proba = task == "classification" and hasattr(pipeline, "predict_proba")
    body = {"instances": records(frame, features), "options": {"return_proba": proba}}
    response = await api.predict(model, "latest", body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["model"], answer["version"], answer["task"]) == (model, 1, task)
    expected = pipeline.predict(frame[features])
    # Floats to the last few ulps only: BLAS kernels round differently depending on the
    # memory alignment of their input, so even scikit-learn fed the same values from two
    # allocations can differ in the last bit (linear members, kNN distances).
    if task == "classification":
        assert answer["predictions"] == list(expected)
        assert answer["classes"] == ["setosa", "versicolor", "virginica"]
        if proba:
            probabilities = pipeline.predict_proba(frame[features])
            np.testing.assert_allclose(
                answer["probabilities"], probabilities, rtol=1e-12, atol=1e-15
            )
        else:
            assert kind == "pasting_votes" and "probabilities" not in answer
    else:
        np.testing.assert_allclose(answer["predictions"], expected, rtol=1e-12, atol=0)
        assert "classes" not in answer
    assert answer["warnings"] == []


async def test_columnar_instances(trained: Trained) -> None:
    frame = iris_frame().head(5)
    body = {
        "instances": {"columns": IRIS_FEATURES, "data": frame[IRIS_FEATURES].to_numpy().tolist()}
    }
    response = await trained.api.predict("cla-random_forest", 1, body)
    assert response.status_code == 200
    assert len(response.json()["predictions"]) == 5


async def test_votes_agreement_and_voting_override(trained: Trained) -> None:
    rows = records(iris_frame().sample(20, random_state=3), IRIS_FEATURES)
    options = {"return_votes": True, "return_proba": True, "voting": "hard"}
    response = await trained.api.predict("cla-voting", 1, {"instances": rows, "options": options})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert len(answer["votes"]) == len(answer["agreement"]) == len(answer["probabilities"]) == 20
    for votes, agreement, label in zip(
        answer["votes"], answer["agreement"], answer["predictions"], strict=True
    ):
        assert sum(votes.values()) == 3
        assert agreement == pytest.approx(votes[label] / 3)
    soft = await trained.api.predict(
        "cla-bagging", 1, {"instances": rows, "options": {"voting": "soft"}}
    )
    assert soft.status_code == 200


async def test_regression_std(trained: Trained) -> None:
    frame = diabetes_frame().head(6)
    body = {"instances": records(frame, DIABETES_FEATURES), "options": {"return_std": True}}
    response = await trained.api.predict("reg-random_forest", 1, body)
    assert response.status_code == 200
    std = response.json()["std"]
    assert len(std) == 6 and all(s >= 0 for s in std)


async def test_options_a_kind_cannot_honour_422(trained: Trained) -> None:
    rows = records(iris_frame().head(2), IRIS_FEATURES)
    response = await trained.api.predict(
        "cla-gradient_boosting", 1, {"instances": rows, "options": {"voting": "hard"}}
    )
    assert response.status_code == 422
    assert locs(response) == [["options", "voting"]]
    response = await trained.api.predict(
        "cla-random_forest", 1, {"instances": rows, "options": {"return_std": True}}
    )
    assert locs(response) == [["options", "return_std"]]
    response = await trained.api.predict(
        "cla-random_forest", 1, {"instances": rows, "options": {"voting": "maybe"}}
    )
    assert response.status_code == 422 and locs(response) == [["options", "voting"]]


async def test_bad_rows_422_name_row_and_column(trained: Trained) -> None:
    good = records(iris_frame().head(3), IRIS_FEATURES)
    rows = [dict(good[0]), dict(good[1]), dict(good[2])]
    del rows[0]["petal_width"]
    rows[1]["sepal_length"] = "long"
    rows[2]["sepal_width"] = math.inf
    content = json.dumps({"instances": rows})  # Infinity: JSON as Python writes it
    response = await trained.api.client.post(
        "/v1/models/cla-random_forest/versions/1/predict",
        content=content,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert locs(response) == [
        ["instances", 0, "petal_width"],
        ["instances", 1, "sepal_length"],
        ["instances", 2, "sepal_width"],
    ]


async def test_extra_columns_are_ignored_with_a_warning(trained: Trained) -> None:
    rows = [{**records(iris_frame().head(1), IRIS_FEATURES)[0], "colour": "blue"}]
    response = await trained.api.predict("cla-random_forest", 1, {"instances": rows})
    assert response.status_code == 200
    assert response.json()["warnings"] == ["extra columns ignored: colour"]


async def test_unknown_model_or_version_404(trained: Trained) -> None:
    body = {"instances": records(iris_frame().head(1), IRIS_FEATURES)}
    assert (await trained.api.predict("nope", 1, body)).status_code == 404
    assert (await trained.api.predict("cla-random_forest", 4, body)).status_code == 404
    assert (await trained.api.predict("cla-random_forest", "prod", body)).status_code == 404


async def test_model_cache_serves_repeated_predictions(trained: Trained) -> None:
    body = {"instances": records(iris_frame().head(1), IRIS_FEATURES)}
    for _ in range(3):
        assert (await trained.api.predict("cla-extra_trees", 1, body)).status_code == 200
    metrics = (await trained.api.client.get("/metrics")).text
    hits = re.search(r"^ensemble_model_cache_hits_total (\S+)$", metrics, flags=re.MULTILINE)
    assert hits is not None and float(hits.group(1)) >= 2


async def test_equal_options_ask_the_engine_with_one_shared_object() -> None:
    """Each combination of options is asked of the engine with one frozen
    ``PredictOptions``, equal to the one its fields make, shared by the requests giving
    it (made per request, it cost every prediction ~1 us)."""
    from itertools import product

    from app.schemas.predictions import PredictOptionsIn
    from app.services.predictions import predict_options
    from ensembles.inference import PredictOptions

    for voting, proba, votes, std in product((None, "hard", "soft"), *[(False, True)] * 3):
        given: dict[str, Any] = {
            "voting": voting,
            "return_proba": proba,
            "return_votes": votes,
            "return_std": std,
        }
        made = predict_options(PredictOptionsIn(**given))
        assert made == PredictOptions(**given)
        assert made is predict_options(PredictOptionsIn(**given))
