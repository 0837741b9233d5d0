"""Numbers beyond float32's range are a 4xx naming the row and column, on every body.

scikit-learn's trees cast rows to float32: ``1e308``, ``-1e300`` or ``3.5e38`` in a feature
made random forests, voting, AdaBoost, bagging and stacking answer 500 (``Input X contains
infinity or a value too large for dtype('float32')``) on ``/v1`` and ``/v2``.  Every kind is
now held to float32's range at the checked-columns stage, so JSON records, columnar JSON,
Arrow and Parquet bodies, and ``/v2`` JSON and binary tensors all refuse such a number,
``/v2`` in the protocol's ``{"error": ...}``.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import pytest_asyncio

from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, iris_frame
from tests.kinds import SPECS

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

KINDS = ["random_forest", "voting", "adaboost", "bagging", "stacking"]
HEADER = "Inference-Header-Content-Length"
BEYOND = "expected a number between -3.4028235e+38 and 3.4028235e+38 (float32's range"
ROW, COLUMN = 1, "petal_width"  # where the number goes
PATHS = ["records", "columnar", "arrow", "parquet", "v2 json", "v2 binary"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    """One model per kind, trained on iris."""
    settings = make_settings(tmp_path_factory.mktemp("float32"), max_concurrent_jobs=2)
    async for _, client in started(settings):
        dataset = await client.iris()
        jobs = []
        for kind in KINDS:
            body = {
                "dataset_id": dataset,
                "target": "species",
                "ensemble": SPECS[(kind, "classification")],
                "random_state": 0,
            }
            response = await client.submit(kind.replace("_", "-"), body)
            assert response.status_code == 202, response.text
            jobs.append(response.json()["id"])
        for job_id in jobs:
            job = await client.wait_job(job_id, timeout=180)
            assert job["status"] == "succeeded", job
        yield client


def rows_with(value: float) -> pd.DataFrame:
    frame = iris_frame()[IRIS_FEATURES].head(3).reset_index(drop=True)
    frame.loc[ROW, COLUMN] = value
    return frame


def table_body(frame: pd.DataFrame, fmt: str) -> tuple[bytes, str]:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = io.BytesIO()
    if fmt == "parquet":
        pq.write_table(table, sink)
        return sink.getvalue(), "application/vnd.apache.parquet"
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue(), "application/vnd.apache.arrow.stream"


async def send(api: Api, model: str, path: str, frame: pd.DataFrame) -> Any:
    """The rows sent the ``path`` way; the response."""
    v1 = f"/v1/models/{model}/versions/latest/predict"
    v2 = f"/v2/models/{model}/infer"
    if path == "records":
        return await api.client.post(v1, json={"instances": frame.to_dict(orient="records")})
    if path == "columnar":
        body = {"columns": list(frame.columns), "data": frame.to_numpy().tolist()}
        return await api.client.post(v1, json={"instances": body})
    if path in ("arrow", "parquet"):
        content, media = table_body(frame, path)
        return await api.client.post(v1, content=content, headers={"content-type": media})
    if path == "v2 json":
        tensors = [
            {"name": f, "shape": [len(frame)], "datatype": "FP64", "data": frame[f].tolist()}
            for f in IRIS_FEATURES
        ]
        return await api.client.post(v2, json={"inputs": tensors})
    matrix = np.ascontiguousarray(frame.to_numpy(np.float64)).tobytes()
    tensor = {"name": "rows", "shape": list(frame.shape), "datatype": "FP64"}
    tensor["parameters"] = {"binary_data_size": len(matrix)}
    head = json.dumps({"inputs": [tensor]}).encode()
    return await api.client.post(v2, content=head + matrix, headers={HEADER: str(len(head))})


def refusal(response: Any, path: str) -> str:
    """The one problem's message, checked to name row and column (/v1: a 422 problem;
    /v2: a 400 in the protocol's shape, naming the tensor and element)."""
    if path.startswith("v2"):
        assert response.status_code == 400, response.text
        assert response.headers["content-type"] == "application/json"
        document = response.json()
        assert set(document) == {"error"}, document
        where = (
            f"input '{COLUMN}' element {ROW}: "
            if path == "v2 json"
            else f"input 'rows' column 3 (feature '{COLUMN}') element {ROW}: "
        )
        message: str = document["error"]
        assert where + BEYOND in message, message
        return message
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["loc"] == ["instances", ROW, COLUMN]
    assert error["msg"].startswith(BEYOND), error
    text: str = error["msg"]
    return text


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_number_beyond_float32_is_refused_naming_row_and_column(
    api: Api, kind: str, path: str
) -> None:
    response = await send(api, kind.replace("_", "-"), path, rows_with(1e308))
    assert refusal(response, path).endswith("got 1e+308")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("value", [-1e300, 3.5e38, 3.4028236e38])
async def test_just_beyond_or_far_below_is_refused_too(api: Api, value: float, path: str) -> None:
    refusal(await send(api, "random-forest", path, rows_with(value)), path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", KINDS)
async def test_float32_s_largest_number_still_predicts(api: Api, kind: str, path: str) -> None:
    """3.4e38 always worked; 3.4028235e38 (numpy's figure for float32's largest) works."""
    frame = rows_with(3.4e38)
    frame.loc[2, "sepal_length"] = -3.4028235e38
    response = await send(api, kind.replace("_", "-"), path, frame)
    assert response.status_code == 200, response.text


async def test_an_integer_beyond_float32_and_non_finite_json_numbers_are_refused(
    api: Api,
) -> None:
    """A 40-digit integer in JSON is named as 1e308 is; ``NaN`` and ``Infinity`` (which
    /v1's parser takes) are not finite: 422 naming the cell on /v1, 400 on /v2."""
    cells = ", ".join(f'"{c}": 1.0' for c in IRIS_FEATURES[:3])
    big = '{"instances": [{' + cells + ', "petal_width": 0.2}, {' + cells
    big += ', "petal_width": ' + "9" * 40 + "}]}"
    path = "/v1/models/random-forest/versions/1/predict"
    headers = {"content-type": "application/json"}
    refusal(await api.client.post(path, content=big, headers=headers), "records")
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = big.replace("9" * 40, literal)
        response = await api.client.post(path, content=body, headers=headers)
        assert response.status_code == 422, response.text
        (error,) = response.json()["errors"]
        assert error["loc"] == ["instances", ROW, COLUMN]
        assert error["msg"].startswith("expected a finite number"), error
        tensors = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [1]}]}
        text = json.dumps(tensors).replace("[1]", f"[1, 2, 3, {literal}]")
        response = await api.client.post("/v2/models/random-forest/infer", content=text)
        assert response.status_code == 400, response.text
        assert set(response.json()) == {"error"}


async def test_binary_infinities_and_nan_on_v2(api: Api) -> None:
    """Infinities are refused as in JSON; NaN is a missing value, refused by a model that
    had none in training: 400s naming the element, never a 500."""
    for value, expected in [
        (np.inf, "expected a finite number, got inf"),
        (-np.inf, "expected a finite number, got -inf"),
        (np.nan, "column 'petal_width' cannot be missing for this model"),
    ]:
        response = await send(api, "bagging", "v2 binary", rows_with(value))
        assert response.status_code == 400, response.text
        message = response.json()["error"]
        assert f"input 'rows' column 3 (feature '{COLUMN}') element {ROW}: {expected}" in message
