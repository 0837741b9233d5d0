"""Explained predictions through the service: /v1 `options.explain` (and the query string,
`explain_top`), the row cap's 413, /v2's `contributions` and `base_values` equal to /v1's,
and the values equal to the library's on the stored model."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from typing import Any

import joblib
import numpy as np
import pytest
import pytest_asyncio

from ensembles.explain.explanation import explain
from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, diabetes_frame, iris_frame, records

pytestmark = pytest.mark.asyncio(loop_scope="module")

MAX_EXPLAIN_ROWS = 6
SOFT_VOTE_OF_FORESTS = {
    "kind": "voting",
    "params": {"voting": "soft"},
    "estimators": [
        {"name": "forest", "kind": "random_forest", "params": {"n_estimators": 10}},
        {"name": "extra", "kind": "extra_trees", "params": {"n_estimators": 10}},
    ],
}
DIABETES_FEATURES = [c for c in diabetes_frame().columns if c != "progression"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    settings = make_settings(tmp_path_factory.mktemp("explain"), max_explain_rows=MAX_EXPLAIN_ROWS)
    async for _, client in started(settings):
        iris = await client.upload_frame(iris_frame(), "iris")
        diabetes = await client.upload_frame(diabetes_frame(), "diabetes")
        await client.train(
            "vote",
            {"dataset_id": iris, "target": "species", "ensemble": SOFT_VOTE_OF_FORESTS},
        )
        knn = {"kind": "bagging", "params": {"n_estimators": 3}, "estimator": {"kind": "knn"}}
        await client.train(
            "knn", {"dataset_id": diabetes, "target": "progression", "ensemble": knn}
        )
        yield client


def _iris_rows(n: int = 4) -> list[dict[str, Any]]:
    return records(iris_frame().sample(n, random_state=3), IRIS_FEATURES)


async def _stored(api: Api, model: str) -> Any:
    artifact = await api.client.get(f"/v1/models/{model}/versions/latest/artifact")
    return joblib.load(io.BytesIO(artifact.content))


async def test_v1_explains_a_soft_vote_of_forests_exactly(api: Api) -> None:
    rows = _iris_rows()
    body = {"instances": rows, "options": {"explain": True, "return_proba": True}}
    response = await api.predict("vote", "latest", body)
    assert response.status_code == 200, response.text
    answer = response.json()
    doc = answer["explanations"]
    assert (doc["space"], doc["method"], doc["exact"]) == ("probability", "tree_shap", True)
    assert doc["features"] == IRIS_FEATURES
    assert doc["additivity_error"] <= 1e-6
    classes = answer["classes"]
    for i, row in enumerate(doc["contributions"]):
        for j, label in enumerate(classes):
            total = doc["base_values"][label] + sum(row[label].values())
            assert total == pytest.approx(answer["probabilities"][i][j], abs=1e-6)
            assert doc["outputs"][i][label] == pytest.approx(answer["probabilities"][i][j])
    pipeline = await _stored(api, "vote")
    frame = iris_frame().sample(4, random_state=3)[IRIS_FEATURES]
    Xt = np.asarray(pipeline[0].transform(frame), dtype=np.float64)
    direct = explain(pipeline, "classification", Xt, classes).document()
    assert direct["contributions"] == doc["contributions"]


async def test_the_query_string_asks_explain_and_top(api: Api) -> None:
    url = "/v1/models/vote/versions/latest/predict?explain=true&explain_top=2"
    response = await api.client.post(url, json={"instances": _iris_rows(2)})
    assert response.status_code == 200, response.text
    for row in response.json()["explanations"]["contributions"]:
        for values in row.values():
            assert len(values) == 3 and "(other)" in values


async def test_a_plain_request_has_no_explanations(api: Api) -> None:
    response = await api.predict("vote", "latest", {"instances": _iris_rows(2)})
    assert response.status_code == 200 and "explanations" not in response.json()


async def test_more_rows_than_the_explain_cap_is_a_413(api: Api) -> None:
    rows = _iris_rows(MAX_EXPLAIN_ROWS + 1)
    response = await api.predict(
        "vote", "latest", {"instances": rows, "options": {"explain": True}}
    )
    assert response.status_code == 413, response.text
    assert "ENSEMBLE_MAX_EXPLAIN_ROWS" in response.text
    plain = await api.predict("vote", "latest", {"instances": rows})
    assert plain.status_code == 200


async def test_a_bad_explain_top_is_a_422_naming_it(api: Api) -> None:
    body = {"instances": _iris_rows(1), "options": {"explain": True, "explain_top": 0}}
    response = await api.predict("vote", "latest", body)
    assert response.status_code == 422
    assert "explain_top" in response.text


def _tensors(frame: Any, features: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": f, "shape": [len(frame)], "datatype": "FP64", "data": frame[f].tolist()}
        for f in features
    ]


@pytest.mark.parametrize(
    ("model", "features", "frame"),
    [("vote", IRIS_FEATURES, iris_frame), ("knn", DIABETES_FEATURES, diabetes_frame)],
    ids=["classification", "regression-permutation"],
)
async def test_v2_contributions_equal_v1(
    api: Api, model: str, features: list[str], frame: Any
) -> None:
    rows = frame().sample(5, random_state=4)
    v1 = await api.predict(
        model, "latest", {"instances": records(rows, features), "options": {"explain": True}}
    )
    assert v1.status_code == 200, v1.text
    doc = v1.json()["explanations"]
    body = {"inputs": _tensors(rows, features), "parameters": {"explain": True}}
    v2 = await api.client.post(f"/v2/models/{model}/infer", json=body)
    assert v2.status_code == 200, v2.text
    outputs = {o["name"]: o for o in v2.json()["outputs"]}
    contributions = np.asarray(outputs["contributions"]["data"]).reshape(
        outputs["contributions"]["shape"]
    )
    parameters = outputs["contributions"]["parameters"]
    assert json.loads(parameters["features"]) == doc["features"]
    if "classes" in parameters:
        classes = json.loads(parameters["classes"])
        expected = [
            [[r[c][f] for f in doc["features"]] for c in classes] for r in doc["contributions"]
        ]
        base = [doc["base_values"][c] for c in classes]
    else:
        expected = [[r[f] for f in doc["features"]] for r in doc["contributions"]]
        base = [doc["base_values"]]
    np.testing.assert_array_equal(contributions, expected)
    np.testing.assert_array_equal(outputs["base_values"]["data"], base)


async def test_v2_over_the_explain_cap_is_a_413(api: Api) -> None:
    rows = iris_frame().head(MAX_EXPLAIN_ROWS + 1)
    body = {"inputs": _tensors(rows, IRIS_FEATURES), "parameters": {"explain": True}}
    response = await api.client.post("/v2/models/vote/infer", json=body)
    assert response.status_code == 413, response.text


async def test_a_table_body_asks_explain_in_the_query(api: Api) -> None:
    frame = iris_frame().head(3)[IRIS_FEATURES]
    sink = io.BytesIO()
    frame.to_parquet(sink)
    response = await api.client.post(
        "/v1/models/vote/versions/latest/predict?explain=true&explain_top=1",
        content=sink.getvalue(),
        headers={"Content-Type": "application/vnd.apache.parquet"},
    )
    assert response.status_code == 200, response.text
    doc = response.json()["explanations"]
    assert len(doc["contributions"]) == 3 and doc["additivity_error"] <= 1e-6
    assert all(len(values) == 2 for row in doc["contributions"] for values in row.values())


async def test_an_explanation_over_its_time_budget_is_a_422_not_a_held_worker(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A permutation estimate checks the budget as it goes (TreeSHAP never needs to)."""
    settings = make_settings(tmp_path_factory.mktemp("explain-slow"), explain_seconds=1e-9)
    async for _, client in started(settings):
        diabetes = await client.upload_frame(diabetes_frame(), "diabetes")
        knn = {"kind": "bagging", "params": {"n_estimators": 3}, "estimator": {"kind": "knn"}}
        await client.train(
            "knn", {"dataset_id": diabetes, "target": "progression", "ensemble": knn}
        )
        rows = records(diabetes_frame().head(3), DIABETES_FEATURES)
        slow = await client.predict(
            "knn", "latest", {"instances": rows, "options": {"explain": True}}
        )
        assert slow.status_code == 422, slow.text
        assert slow.json()["type"].endswith("explain-too-slow")
        assert "ENSEMBLE_EXPLAIN_SECONDS" in slow.json()["detail"]
        plain = await client.predict("knn", "latest", {"instances": rows})
        assert plain.status_code == 200
