"""Helpers shared by the API tests: small tables and a client that knows the routes."""

from __future__ import annotations

import asyncio
import time
from functools import cache
from typing import Any

import httpx
import pandas as pd
from sklearn.datasets import load_diabetes, load_iris

IRIS_FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
FINISHED = ("succeeded", "failed", "cancelled")


def iris_frame() -> pd.DataFrame:
    """A fresh copy each call: a test that adds a column must not change the next test's."""
    return _iris_frame().copy()


def diabetes_frame() -> pd.DataFrame:
    return _diabetes_frame().copy()


@cache
def _iris_frame() -> pd.DataFrame:
    bunch = load_iris(as_frame=True)
    frame = bunch.data.copy()
    frame.columns = IRIS_FEATURES
    frame["species"] = [str(bunch.target_names[i]) for i in bunch.target]
    return frame


@cache
def _diabetes_frame() -> pd.DataFrame:
    bunch = load_diabetes(as_frame=True)
    frame = bunch.data.copy()
    frame["progression"] = bunch.target.astype(float)
    return frame


def iris_csv() -> str:
    return iris_frame().to_csv(index=False)


def records(frame: pd.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = frame[columns].to_dict(orient="records")
    return out


class Api:
    """Thin helpers over an httpx client; every call returns the raw response."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def upload_csv(self, text: str, name: str | None = "iris", **kw: Any) -> httpx.Response:
        data = {"name": name} if name else {}
        files = {"file": ("table.csv", text.encode(), "text/csv")}
        return await self.client.post("/v1/datasets", files=files, data=data, **kw)

    async def upload_frame(self, frame: pd.DataFrame, name: str) -> str:
        body = {"name": name, "columns": list(frame.columns), "rows": frame.to_numpy().tolist()}
        response = await self.client.post("/v1/datasets", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    async def iris(self) -> str:
        response = await self.upload_csv(iris_csv())
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    async def submit(self, model: str, body: dict[str, Any], wait: bool = False) -> httpx.Response:
        suffix = "?wait=true" if wait else ""
        return await self.client.post(f"/v1/models/{model}/versions{suffix}", json=body)

    async def train(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        """Train and wait; the version document."""
        response = await self.submit(model, body, wait=True)
        assert response.status_code == 201, response.text
        version: dict[str, Any] = response.json()
        return version

    async def job(self, job_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        return job

    async def wait_job(
        self, job_id: str, timeout: float = 60.0, until: tuple[str, ...] = FINISHED
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = await self.job(job_id)
            if job["status"] in until or time.monotonic() > deadline:
                return job
            await asyncio.sleep(0.05)

    async def predict(self, model: str, ref: str | int, body: dict[str, Any]) -> httpx.Response:
        return await self.client.post(f"/v1/models/{model}/versions/{ref}/predict", json=body)


def forest(dataset_id: str, n_estimators: int = 10, **extra: Any) -> dict[str, Any]:
    return {
        "dataset_id": dataset_id,
        "target": "species",
        "ensemble": {"kind": "random_forest", "params": {"n_estimators": n_estimators}},
        "random_state": 0,
        **extra,
    }


def locs(response: httpx.Response) -> list[list[Any]]:
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    return [e["loc"] for e in response.json().get("errors") or []]
