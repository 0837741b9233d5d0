"""adaboost_mh through the service: listed in the catalog, trained by a worker, its
curves, hardest rows and lineage in the version, served as its artifact answers, and a
regression target refused at submit time at the kind."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from importlib import metadata
from typing import Any

import joblib
import numpy as np
import pytest
import pytest_asyncio

from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, diabetes_frame, iris_frame, locs, records

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROWS = iris_frame().reset_index(drop=True)


class Served:
    def __init__(self, api: Api, iris: str, diabetes: str) -> None:
        self.api, self.iris, self.diabetes = api, iris, diabetes


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    settings = make_settings(tmp_path_factory.mktemp("adaboost-mh"))
    async for _, api in started(settings):
        iris = await api.upload_frame(iris_frame(), "iris")
        diabetes = await api.upload_frame(diabetes_frame(), "diabetes")
        body = {
            "dataset_id": iris,
            "target": "species",
            "ensemble": {"kind": "adaboost_mh", "params": {"n_estimators": 25, "max_depth": 2}},
            "random_state": 5,
        }
        response = await api.submit("mh", body)
        assert response.status_code == 202, response.text
        job = await api.wait_job(response.json()["id"], timeout=180)
        assert job["status"] == "succeeded", job
        yield Served(api, iris, diabetes)


async def test_the_catalog_lists_it_for_classification_anywhere(served: Served) -> None:
    response = await served.api.client.get("/v1/kinds")
    entry = next(e for e in response.json()["ensemble_kinds"] if e["kind"] == "adaboost_mh")
    assert entry["tasks"] == ["classification"]
    assert entry["top_level_only"] is False
    assert entry["sklearn_classes"] == {"classification": "AdaBoostMHClassifier"}
    props = entry["params"]["classification"]["properties"]
    assert set(props) == {"n_estimators", "learning_rate", "max_depth"}


async def test_the_version_has_its_curves_hardest_rows_and_lineage(served: Served) -> None:
    response = await served.api.client.get("/v1/models/mh/versions/1")
    version: dict[str, Any] = response.json()
    metrics = version["metrics"]
    curves = {c["name"]: c for c in metrics["curves"]}
    loss, bound = curves["train_hamming_loss"], curves["hamming_loss_bound"]
    assert loss["x"] == bound["x"] == list(range(1, 26))
    assert all(a <= b for a, b in zip(loss["y"], bound["y"], strict=True))
    hardest = metrics["hardest_rows"]
    assert len(hardest["rows"]) == 20 and hardest["n_members"] == 25
    assert {r["target"] for r in hardest["rows"]} <= {"setosa", "versicolor", "virginica"}
    versions = version["artifact"]["library_versions"]
    assert versions["ensemble-service"] == metadata.version("ensemble-service")
    assert version["training"]["n_estimators"] == 25
    assert version["inference"]["engine"] == "scikit-learn"


async def test_predictions_are_the_artifact_s(served: Served) -> None:
    artifact = await served.api.client.get("/v1/models/mh/versions/1/artifact")
    stored = joblib.load(io.BytesIO(artifact.content))
    assert type(stored[-1]).__module__ == "ensembles.kinds.adaboost_mh"
    body = {"instances": records(ROWS, IRIS_FEATURES), "options": {"return_proba": True}}
    response = await served.api.predict("mh", 1, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    X = ROWS[IRIS_FEATURES]
    assert answer["predictions"] == list(stored.predict(X))
    assert answer["classes"] == list(stored.classes_)
    np.testing.assert_allclose(answer["probabilities"], stored.predict_proba(X), rtol=1e-12)


@pytest.mark.parametrize(
    ("ensemble", "loc", "says"),
    [
        ({"kind": "adaboost_mh"}, ["ensemble", "kind"], "does not do regression"),
        (
            {
                "kind": "bagging",
                "estimator": {"kind": "adaboost_mh", "params": {"max_depth": 2}},
            },
            ["ensemble", "estimator", "kind"],
            "does not do regression",
        ),
    ],
    ids=["top", "nested"],
)
async def test_a_regression_target_is_refused_at_the_kind(
    served: Served, ensemble: dict[str, Any], loc: list[Any], says: str
) -> None:
    body = {"dataset_id": served.diabetes, "target": "progression", "ensemble": ensemble}
    response = await served.api.submit("refused", body)
    assert response.status_code == 422, response.text
    assert loc in locs(response)
    assert says in response.text


@pytest.mark.parametrize(
    ("params", "name"),
    [({"max_depth": 0}, "max_depth"), ({"learning_rate": 0}, "learning_rate")],
    ids=["max_depth", "learning_rate"],
)
async def test_out_of_range_parameters_are_refused_at_their_field(
    served: Served, params: dict[str, Any], name: str
) -> None:
    body = {
        "dataset_id": served.iris,
        "target": "species",
        "ensemble": {"kind": "adaboost_mh", "params": params},
    }
    response = await served.api.submit("refused", body)
    assert response.status_code == 422, response.text
    assert ["ensemble", "params", name] in locs(response)


async def test_its_report_and_every_plot_it_has_are_drawn(served: Served) -> None:
    version = (await served.api.client.get("/v1/models/mh/versions/1")).json()
    assert {"oob_curve", "feature_importances"} <= set(version["plots"])  # curves: one plot
    for plot in version["plots"]:
        response = await served.api.client.get(f"/v1/models/mh/versions/1/plots/{plot}")
        assert response.status_code == 200, (plot, response.text)
    report = await served.api.client.get("/v1/models/mh/versions/1/report")
    assert report.status_code == 200 and "Hamming loss" in report.text
