"""The inference engine of a version: chosen once at creation, recorded, and honoured.

A tree ensemble that passes the fidelity check is served by the compiled engine (treelite
GTIL) and its version says so; any other kind, or a tree ensemble whose compiled answers
differ from scikit-learn's, is served by scikit-learn with the reason in its metadata.
Either way the answers equal the stored scikit-learn model's.
"""

from __future__ import annotations

import io
from typing import Any

import joblib
import numpy as np
import pytest
from fastapi import FastAPI

from app.services.training import prepare_job
from app.threads import in_thread
from ensembles import jobs
from ensembles.inference import ENGINE, SKLEARN, compiling
from ensembles.parallel import MemberPool
from tests.api.support import IRIS_FEATURES, Api, forest, iris_frame, records

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FORCED = "labels differ on 1 of 150 rows (forced by the test)"


async def _predict_and_compare(api: Api, app: FastAPI, model: str) -> Any:
    """Predict 30 rows; the answer must equal the stored model's.  Returns the servable."""
    frame = iris_frame().sample(30, random_state=2)
    body = {"instances": records(frame, IRIS_FEATURES), "options": {"return_proba": True}}
    response = await api.predict(model, "latest", body)
    assert response.status_code == 200, response.text
    answer = response.json()
    artifact = await api.client.get(f"/v1/models/{model}/versions/latest/artifact")
    pipeline = joblib.load(io.BytesIO(artifact.content))
    assert answer["predictions"] == list(pipeline.predict(frame[IRIS_FEATURES]))
    expected = pipeline.predict_proba(frame[IRIS_FEATURES])
    np.testing.assert_allclose(answer["probabilities"], expected, rtol=0, atol=1e-9)
    services = app.state.services
    record = await in_thread(services.registry.get_version, model, "latest")
    servable = services.cache.peek((record.model, record.version, record.artifact_sha256))
    assert servable is not None, "the model should be cached after a prediction"
    return servable


async def test_the_version_records_the_engine_chosen_at_creation(api: Api, app: FastAPI) -> None:
    dataset = await api.iris()
    compiled = await api.train("iris-forest", forest(dataset, n_estimators=12))
    inference = compiled["inference"]
    assert inference["ok"] is True and inference["engine"] == ENGINE
    assert inference["reason"] is None
    assert inference["n_rows_checked"] >= 150 and inference["max_abs_diff"] <= 1e-9
    assert inference["crossover_rows"] >= 1
    servable = await _predict_and_compare(api, app, "iris-forest")
    assert [e.name for e in servable.engines] == [ENGINE, SKLEARN]
    assert servable.engine_for(1).name == ENGINE

    members = [
        {"name": "lr", "kind": "logistic_regression"},
        {"name": "nb", "kind": "gaussian_nb"},
    ]
    voting = {"kind": "voting", "params": {"voting": "soft"}, "estimators": members}
    plain = await api.train("iris-vote", {**forest(dataset), "ensemble": voting})
    assert plain["inference"]["ok"] is False
    assert plain["inference"]["engine"] == SKLEARN
    assert "not a tree ensemble" in plain["inference"]["reason"]
    servable = await _predict_and_compare(api, app, "iris-vote")
    assert [e.name for e in servable.engines] == [SKLEARN]


async def test_a_voting_ensemble_with_a_forest_member_is_compiled_member_by_member(
    api: Api, app: FastAPI
) -> None:
    dataset = await api.iris()
    members = [
        {"name": "lr", "kind": "logistic_regression"},
        {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 8}},
        {"name": "nb", "kind": "gaussian_nb"},
    ]
    voting = {"kind": "voting", "params": {"voting": "soft"}, "estimators": members}
    version = await api.train("iris-mixed-vote", {**forest(dataset), "ensemble": voting})
    inference = version["inference"]
    assert inference["ok"] is True and inference["engine"] == ENGINE
    engines = {m["name"]: m["engine"] for m in inference["members"]}
    assert engines == {"lr": "numpy", "rf": ENGINE, "nb": "numpy"}
    servable = await _predict_and_compare(api, app, "iris-mixed-vote")
    assert [e.name for e in servable.engines] == [ENGINE, SKLEARN]
    assert servable.engine_for(1).name == ENGINE


async def test_a_forced_fidelity_failure_is_served_by_sklearn_with_the_reason(
    api: Api, app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own code, run in this process so the check can be made to fail."""
    services = app.state.services
    dataset = await api.iris()
    document = await prepare_job(services.registry, services.settings, "forced", forest(dataset))
    job = await in_thread(services.registry.submit_job, "forced", document.to_json())
    await in_thread(services.registry.start_job, job.id)
    monkeypatch.setattr(compiling, "compare", lambda *_args, **_kw: (FORCED, 0.5))
    await in_thread(
        jobs.run_training, services.registry, job.id, MemberPool.local(1), lambda: False
    )
    assert (await api.job(job.id))["status"] == "succeeded"

    version = (await api.client.get("/v1/models/forced/versions/1")).json()
    inference = version["inference"]
    assert inference["ok"] is False and inference["engine"] == SKLEARN
    assert inference["reason"] == FORCED and inference["max_abs_diff"] == 0.5
    monkeypatch.undo()  # loading re-checks nothing for a refused version: scikit-learn serves
    servable = await _predict_and_compare(api, app, "forced")
    assert [e.name for e in servable.engines] == [SKLEARN]
    assert servable.engine_for(1).name == SKLEARN


async def test_the_version_resource_documents_its_inference_field(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    inference = schemas["VersionOut"]["properties"]["inference"]
    refs = {option.get("$ref") for option in inference.get("anyOf", [inference])}
    assert "#/components/schemas/InferenceOut" in refs
    fields = schemas["InferenceOut"]["properties"]
    assert {"engine", "ok", "reason", "max_abs_diff", "crossover_rows"} <= set(fields)
