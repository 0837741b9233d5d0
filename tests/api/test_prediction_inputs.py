"""Prediction limits and inputs with missing values."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from app.settings import Settings
from tests.api.conftest import started
from tests.api.support import IRIS_FEATURES, Api, forest, iris_frame, locs, records


async def test_too_many_rows_413(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_predict_rows=5)):
        dataset = await api.iris()
        await api.train("small", forest(dataset, n_estimators=3))
        body = {"instances": records(iris_frame().head(6), IRIS_FEATURES)}
        response = await api.predict("small", 1, body)
        assert response.status_code == 413
        assert locs(response) == [["instances"]]


async def test_missing_values_predict_where_the_model_allows(api: Api) -> None:
    frame = pd.DataFrame(
        {
            "x": [1.0, None, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0] * 3,
            "c": ["a", "b", None, "a", "b", "a", "b", "a"] * 3,
            "y": ["p", "q"] * 12,
        }
    )
    uploaded = await api.upload_csv(frame.to_csv(index=False), name="mixed")
    dataset = uploaded.json()["id"]
    body = {
        "dataset_id": dataset,
        "target": "y",
        "ensemble": {"kind": "bagging", "params": {"n_estimators": 3}},
    }
    await api.train("mixed", body)
    response = await api.predict(
        "mixed", 1, {"instances": [{"x": None, "c": None}, {"x": 2.0, "c": "zzz"}]}
    )
    assert response.status_code == 200, response.text
    assert len(response.json()["predictions"]) == 2


async def test_predict_body_errors(api: Api) -> None:
    dataset = await api.iris()
    await api.train("body", forest(dataset, n_estimators=3))
    url = "/v1/models/body/versions/1/predict"
    wrong_type = await api.client.post(url, content=b"a,b", headers={"content-type": "text/csv"})
    assert wrong_type.status_code == 415
    no_instances = await api.client.post(url, json={"options": {"return_proba": "sometimes"}})
    assert no_instances.status_code == 422
    assert sorted(locs(no_instances), key=str) == [["instances"], ["options", "return_proba"]]
    broken = await api.client.post(url, content=b"{", headers={"content-type": "application/json"})
    assert broken.status_code == 422
