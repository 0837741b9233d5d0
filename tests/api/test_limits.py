"""Every limit of the service, each a setting, each answered with its own 4xx problem.

| limit (setting)                          | answer | test                                       |
|------------------------------------------|--------|--------------------------------------------|
| request body bytes (MAX_UPLOAD_BYTES)    | 413    | test_datasets: over_the_size_limit; below  |
| dataset rows (MAX_DATASET_ROWS)          | 413    | test_datasets: too_many_rows; below (JSON) |
| dataset columns (MAX_DATASET_COLUMNS)    | 413    | below                                      |
| rows per prediction (MAX_PREDICT_ROWS)   | 413    | test_prediction_inputs: too_many_rows      |
| nesting depth (MAX_NESTING_DEPTH)        | 422    | test_training: resource_bounds             |
| members per ensemble (MAX_MEMBERS_...)   | 422    | test_training: resource_bounds             |
| members in total (MAX_TOTAL_MEMBERS)     | 422    | below                                      |
| concurrent jobs (MAX_CONCURRENT_JOBS)    | queued | below                                      |
| queued jobs (MAX_QUEUED_JOBS)            | 429    | test_training: queue_full (Retry-After)    |
| job run time (JOB_TIMEOUT_S)             | failed | test_jobs: job_over_the_timeout            |
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pandas as pd

from app.settings import Settings
from tests.api.conftest import started
from tests.api.support import forest, locs


async def test_too_many_columns_413(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_dataset_columns=3)):
        wide = pd.DataFrame({name: [1.0, 2.0] for name in "abcd"})
        response = await api.upload_csv(wide.to_csv(index=False))
        assert response.status_code == 413, response.text
        assert response.json()["code"] == "too_large" and locs(response) == [["columns"]]
        body = {"columns": list("abcd"), "rows": [[1, 2, 3, 4]]}
        response = await api.client.post("/v1/datasets", json=body)
        assert response.status_code == 413 and locs(response) == [["columns"]]
        narrow = await api.upload_csv(wide[list("abc")].to_csv(index=False))
        assert narrow.status_code == 201


async def test_too_many_json_rows_413(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_dataset_rows=10)):
        body = {"records": [{"a": float(i)} for i in range(11)]}
        response = await api.client.post("/v1/datasets", json=body)
        assert response.status_code == 413 and locs(response) == [["rows"]]


async def test_every_body_is_bounded_not_only_uploads(
    settings_for: Callable[..., Settings],
) -> None:
    async for _, api in started(settings_for(max_upload_bytes=1000)):
        # Bodies other than uploads get the same bound, plus 1 MiB of slack for framing.
        huge = json.dumps({"instances": [{"x": "y" * 1000}] * 1200}).encode()
        response = await api.client.post(
            "/v1/models/m/versions/1/predict",
            content=huge,
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 413
        assert response.json()["code"] == "too_large"
        assert "ENSEMBLE_MAX_UPLOAD_BYTES" in response.json()["errors"][0]["msg"]


async def test_too_many_members_in_total_422(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_total_members=20)):
        dataset = await api.iris()
        body = {
            **forest(dataset),
            "ensemble": {
                "kind": "bagging",
                "params": {"n_estimators": 5},
                "estimator": {"kind": "random_forest", "params": {"n_estimators": 10}},
            },
        }
        response = await api.submit("big", body)
        assert response.status_code == 422
        assert locs(response) == [["ensemble"]]
        assert "50 estimators" in response.json()["errors"][0]["msg"]
        body["ensemble"]["params"] = {"n_estimators": 2}  # type: ignore[index]
        assert (await api.submit("big", body)).status_code == 202


async def test_jobs_beyond_the_concurrency_limit_wait_queued(
    settings_for: Callable[..., Settings],
) -> None:
    async for _, api in started(settings_for(max_concurrent_jobs=1, max_queued_jobs=5)):
        dataset = await api.iris()
        slow = forest(dataset, n_estimators=3000)
        first = (await api.submit("c", slow)).json()
        second = (await api.submit("c", slow)).json()
        await api.wait_job(first["id"], timeout=30, until=("running",))
        for _ in range(5):
            assert (await api.job(second["id"]))["status"] == "queued"
            await asyncio.sleep(0.1)
        running = (await api.client.get("/v1/jobs", params={"status": "running"})).json()
        assert [j["id"] for j in running] == [first["id"]]
        for job in (second, first):
            await api.client.post(f"/v1/jobs/{job['id']}/cancel")
