"""A regression target near float64's limit trains, and its report and plots answer: its
scores overflow (they are stored as missing), a forest's importances are NaN (left out);
both used to fail the job or the report as an internal error."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.api.support import Api, diabetes_frame


@pytest.mark.parametrize("kind", ["random_forest", "bagging", "gradient_boosting"])
async def test_a_target_near_float64s_limit_trains_and_reports(api: Api, kind: str) -> None:
    frame: pd.DataFrame = diabetes_frame().head(120).copy()
    frame["progression"] = frame["progression"] * 1e200
    dataset = await api.upload_frame(frame, "huge")
    body = {
        "dataset_id": dataset,
        "target": "progression",
        "ensemble": {"kind": kind, "params": {"n_estimators": 5}},
        "random_state": 0,
    }
    version = await api.train(f"huge-{kind.replace('_', '-')}", body)
    importances = version.get("feature_importances")
    assert importances is None or all(isinstance(v, float) for v in importances.values())
    model = version["model"]
    report = await api.client.get(f"/v1/models/{model}/versions/1/report")
    assert report.status_code == 200, report.text
    assert version["plots"], version.keys()
    for plot in version["plots"]:
        drawn = await api.client.get(f"/v1/models/{model}/versions/1/plots/{plot}")
        assert drawn.status_code == 200, (plot, drawn.text)
