"""The boosting libraries through the API: trained, measured and served as other kinds,
the artifact the library's own estimator, its lineage naming the library, progress and
cancel per round, and what submit refuses (with the field)."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import catboost
import joblib
import lightgbm
import numpy as np
import onnxruntime
import pytest
import xgboost

from ensembles.export.onnx_format import feeds
from tests.api.support import IRIS_FEATURES, Api, diabetes_frame, iris_frame, locs, records

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


async def _version(api: Api, model: str, body: dict[str, Any]) -> dict[str, Any]:
    return await api.train(model, {"random_state": 3, **body})


async def _artifact(api: Api, model: str) -> Any:
    response = await api.client.get(f"/v1/models/{model}/versions/1/artifact")
    assert response.status_code == 200
    return joblib.load(io.BytesIO(response.content))


async def test_lightgbm_with_early_stopping_is_trained_measured_and_served(api: Api) -> None:
    ensemble = {
        "kind": "lightgbm",
        "params": {"n_estimators": 300, "learning_rate": 0.3, "early_stopping_rounds": 5},
    }
    version = await _version(api, "lgb", {"dataset_id": await api.iris(), "target": "species",
                                          "ensemble": ensemble})  # fmt: skip
    metrics = version["metrics"]
    stopping = metrics["stopping"]
    assert stopping["best_iteration"] < 300 and stopping["validation_rows"] == 12
    assert metrics["estimators"] == []
    [curve] = [c for c in metrics["curves"] if c["name"] == "holdout_accuracy"]
    assert curve["x"][-1] == stopping["best_iteration"]
    assert set(version["feature_importances"]) == set(IRIS_FEATURES)
    assert version["artifact"]["library_versions"]["lightgbm"] == lightgbm.__version__
    pipeline = await _artifact(api, "lgb")
    assert type(pipeline[-1]) is lightgbm.LGBMClassifier
    frame = iris_frame()
    body = {"instances": records(frame, IRIS_FEATURES), "options": {"return_proba": True}}
    response = await api.predict("lgb", 1, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["predictions"] == pipeline.predict(frame[IRIS_FEATURES]).tolist()
    np.testing.assert_allclose(
        answer["probabilities"], pipeline.predict_proba(frame[IRIS_FEATURES]), rtol=0, atol=1e-9
    )


async def test_xgboost_regression_is_served_with_the_library_in_its_lineage(api: Api) -> None:
    frame = diabetes_frame()
    dataset = await api.upload_frame(frame, "diabetes")
    ensemble = {"kind": "xgboost", "params": {"n_estimators": 20, "max_depth": 3}}
    version = await _version(api, "xgb", {"dataset_id": dataset, "target": "progression",
                                          "ensemble": ensemble})  # fmt: skip
    assert version["artifact"]["library_versions"]["xgboost"] == xgboost.__version__
    assert version["training"]["n_estimators"] == 20
    pipeline = await _artifact(api, "xgb")
    assert type(pipeline[-1]) is xgboost.XGBRegressor
    features = [c for c in frame.columns if c != "progression"]
    response = await api.predict("xgb", 1, {"instances": records(frame, features)})
    assert response.status_code == 200, response.text
    np.testing.assert_allclose(
        response.json()["predictions"], pipeline.predict(frame[features]), rtol=0, atol=1e-9
    )


async def test_xgboost_classifies_a_table_s_own_classes_at_the_top_level(api: Api) -> None:
    """iris's species are names, not 0..k-1: trained with early stopping, served by the
    compiled engine, explained, answered on /v2 and exported to ONNX with those names."""
    ensemble = {
        "kind": "xgboost",
        "params": {"n_estimators": 200, "max_depth": 3, "early_stopping_rounds": 5},
    }
    version = await _version(api, "xgbc", {"dataset_id": await api.iris(), "target": "species",
                                           "ensemble": ensemble})  # fmt: skip
    classes = ["setosa", "versicolor", "virginica"]
    assert version["metrics"]["stopping"]["validation_rows"] == 12
    assert version["metrics"]["holdout"]["accuracy"] > 0.8
    assert version["inference"]["engine"] == "treelite-gtil", version["inference"]
    assert version["artifact"]["library_versions"]["xgboost"] == xgboost.__version__
    assert "ensemble-service" in version["artifact"]["library_versions"]
    pipeline = await _artifact(api, "xgbc")
    assert isinstance(pipeline[-1], xgboost.XGBClassifier)
    assert pipeline[-1].classes_.tolist() == classes
    frame = iris_frame()
    rows = frame[IRIS_FEATURES]
    body = {"instances": records(frame, IRIS_FEATURES), "options": {"return_proba": True}}
    response = await api.predict("xgbc", 1, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["classes"] == classes
    assert answer["predictions"] == pipeline.predict(rows).tolist()
    assert set(answer["predictions"]) == set(classes)
    np.testing.assert_allclose(
        answer["probabilities"], pipeline.predict_proba(rows), rtol=0, atol=1e-9
    )
    explained = {"instances": records(frame, IRIS_FEATURES)[:5], "options": {"explain": True}}
    response = await api.predict("xgbc", 1, explained)
    assert response.status_code == 200, response.text
    explanations = response.json()["explanations"]
    assert (explanations["method"], explanations["space"]) == ("tree_shap", "margin")
    assert sorted(explanations["base_values"]) == classes
    assert explanations["additivity_error"] <= 1e-6
    inputs = [
        {"name": c, "shape": [3, 1], "datatype": "FP64", "data": frame[c][:3].tolist()}
        for c in IRIS_FEATURES
    ]
    response = await api.client.post("/v2/models/xgbc/versions/1/infer", json={"inputs": inputs})
    assert response.status_code == 200, response.text
    [labels] = [o for o in response.json()["outputs"] if o["name"] == "predictions"]
    assert labels["data"] == answer["predictions"][:3]
    response = await api.client.get("/v1/models/xgbc/versions/1/export/onnx")
    assert response.status_code == 200, response.text
    assert "label_agreement=1;" in response.headers["X-Export-Fidelity"] + ";"
    session = onnxruntime.InferenceSession(response.content, providers=["CPUExecutionProvider"])
    onnx_labels, _ = session.run(None, feeds(rows, IRIS_FEATURES))
    assert list(onnx_labels) == answer["predictions"]


async def test_catboost_with_categories_and_early_stopping_is_trained_and_served(
    api: Api,
) -> None:
    """String categories reach CatBoost as its cat_features (integer codes), an unseen one
    gets the warning; /v1 and /v2 answer its multiclass labels as a vector."""
    frame = iris_frame()
    frame["petal_band"] = np.where(frame["petal_length"] > 4.5, "long", "short")
    dataset = await api.upload_frame(frame, "iris_bands")
    ensemble = {
        "kind": "catboost",
        "params": {"iterations": 300, "depth": 3, "early_stopping_rounds": 5},
    }
    version = await _version(api, "cat", {"dataset_id": dataset, "target": "species",
                                          "ensemble": ensemble})  # fmt: skip
    assert version["metrics"]["stopping"]["validation_rows"] == 12
    assert version["artifact"]["library_versions"]["catboost"] == catboost.__version__
    pipeline = await _artifact(api, "cat")
    assert type(pipeline[-1]) is catboost.CatBoostClassifier
    assert pipeline[-1].get_cat_feature_indices() == [4]
    features = [*IRIS_FEATURES, "petal_band"]
    rows = frame[features]
    body = {"instances": records(frame, features), "options": {"return_proba": True}}
    response = await api.predict("cat", 1, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["predictions"] == pipeline.predict(rows).ravel().tolist()
    np.testing.assert_allclose(
        answer["probabilities"], pipeline.predict_proba(rows), rtol=0, atol=1e-9
    )
    unseen = {"instances": [{**records(frame, features)[0], "petal_band": "huge"}]}
    response = await api.predict("cat", 1, unseen)
    assert response.status_code == 200, response.text
    assert any("'huge' at row 0" in w for w in response.json()["warnings"]), response.text
    # CatBoost's own TreeSHAP, its categorical column read as the codes it trained on.
    assert version["metrics"]["explanations"]["mean_abs"]["setosa"]["petal_band"] >= 0
    explained = {"instances": records(frame, features)[:5], "options": {"explain": True}}
    response = await api.predict("cat", 1, explained)
    assert response.status_code == 200, response.text
    explanations = response.json()["explanations"]
    assert (explanations["method"], explanations["exact"]) == ("tree_shap", True)
    assert explanations["space"] == "margin" and explanations["features"] == features
    assert explanations["additivity_error"] <= 1e-6
    inputs: list[dict[str, Any]] = [
        {"name": c, "shape": [3, 1], "datatype": "FP64", "data": frame[c][:3].tolist()}
        for c in IRIS_FEATURES
    ]
    band = frame["petal_band"][:3].tolist()
    inputs.append({"name": "petal_band", "shape": [3, 1], "datatype": "BYTES", "data": band})
    response = await api.client.post("/v2/models/cat/versions/1/infer", json={"inputs": inputs})
    assert response.status_code == 200, response.text
    [labels] = [o for o in response.json()["outputs"] if o["name"] == "predictions"]
    assert labels["data"] == answer["predictions"][:3]


async def test_progress_counts_rounds_and_a_cancel_stops_the_fit(api: Api) -> None:
    ensemble = {"kind": "lightgbm", "params": {"n_estimators": 5000, "min_child_samples": 2}}
    body = {"dataset_id": await api.iris(), "target": "species", "ensemble": ensemble}
    job = (await api.submit("slow", body)).json()
    for _ in range(1200):
        job = await api.job(job["id"])
        if job["progress"]["stage"] == "fitting" and job["progress"]["done"] > 0:
            break
        await asyncio.sleep(0.05)
    assert job["progress"]["total"] == 5000, job
    response = await api.client.post(f"/v1/jobs/{job['id']}/cancel")
    assert response.status_code in (200, 202), response.text
    ended = await api.wait_job(job["id"], timeout=30)
    assert ended["status"] == "cancelled", ended
    assert ended["progress"]["done"] < 5000


@pytest.mark.parametrize(
    ("ensemble", "loc", "says"),
    [
        (
            {"kind": "xgboost", "params": {"objective": "reg:squarederror"}},
            ["ensemble", "params", "objective"],
            "is for regression only",
        ),
        (
            {"kind": "lightgbm", "params": {"num_leaves": 1}},
            ["ensemble", "params", "num_leaves"],
            "must be an integer >= 2",
        ),
        (
            {"kind": "lightgbm", "params": {"leaves": 8}},
            ["ensemble", "params", "leaves"],
            "unknown parameter 'leaves'",
        ),
        (
            {
                "kind": "voting",
                "estimators": [
                    {"name": "lgb", "kind": "lightgbm", "params": {"early_stopping_rounds": 3}}
                ],
            },
            ["ensemble", "estimators", 0, "params", "early_stopping_rounds"],
            "top-level",
        ),
    ],
    ids=["objective", "out_of_range", "unknown", "nested_early_stopping"],
)
async def test_bad_specs_are_refused_at_submit_time(
    api: Api, ensemble: dict[str, Any], loc: list[Any], says: str
) -> None:
    body = {"dataset_id": await api.iris(), "target": "species", "ensemble": ensemble}
    response = await api.submit("refused", body)
    assert response.status_code == 422, response.text
    assert loc in locs(response)
    assert says in response.text
