"""The Open Inference Protocol (/v2) answers what /v1 predict answers, for every kind.

Every entry of the shared kinds table is trained once; for each, the same rows go to
``/v1/.../predict`` and to ``/v2/models/.../infer`` (one tensor per feature, and one 2-D
tensor with binary data), asking for every output the model's metadata lists, and the
answers must be equal: labels, values, probabilities, votes, agreement, std.
"""

from __future__ import annotations

import json
import struct
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
import pytest_asyncio

from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, diabetes_frame, iris_frame, records
from tests.kinds import SPECS, cases, entries

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

DIABETES_FEATURES = [c for c in diabetes_frame().columns if c != "progression"]
HEADER = "Inference-Header-Content-Length"


def _model(kind: str, task: str) -> str:
    return f"{task[:3]}-{kind}".replace("_", "-")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    """Every entry of the kinds table trained once (two jobs at a time), plus a model with
    a string feature."""
    settings = make_settings(tmp_path_factory.mktemp("oip"), max_concurrent_jobs=2)
    async for _, client in started(settings):
        iris = await client.upload_frame(iris_frame(), "iris")
        diabetes = await client.upload_frame(diabetes_frame(), "diabetes")
        colored = iris_frame().assign(colour=["red", "green", "blue"] * 50)
        coloured_id = await client.upload_frame(colored, "coloured")
        jobs = []
        for kind, task in entries():
            body = {
                "dataset_id": iris if task == "classification" else diabetes,
                "target": "species" if task == "classification" else "progression",
                "ensemble": SPECS[(kind, task)],
                "random_state": 7,
            }
            response = await client.submit(_model(kind, task), body)
            assert response.status_code == 202, response.text
            jobs.append(response.json()["id"])
        forest = {"kind": "random_forest", "params": {"n_estimators": 5}}
        body = {"dataset_id": coloured_id, "target": "species", "ensemble": forest}
        response = await client.submit("coloured", {**body, "random_state": 0})
        jobs.append(response.json()["id"])
        for job_id in jobs:
            job = await client.wait_job(job_id, timeout=180)
            assert job["status"] == "succeeded", job
        yield client


def _frame(task: str) -> tuple[pd.DataFrame, list[str]]:
    if task == "classification":
        return iris_frame().sample(30, random_state=2), IRIS_FEATURES
    return diabetes_frame().sample(30, random_state=2), DIABETES_FEATURES


def _tensors(frame: pd.DataFrame, features: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": f, "shape": [len(frame)], "datatype": "FP64", "data": frame[f].tolist()}
        for f in features
    ]


def _outputs(document: dict[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """Each output's data in its shape (JSON outputs)."""
    return {
        o["name"]: np.asarray(
            o["data"], dtype=object if o["datatype"] == "BYTES" else None
        ).reshape(o["shape"])
        for o in document["outputs"]
    }


def _binary_outputs(body: bytes, length: int) -> dict[str, np.ndarray[Any, Any]]:
    """Outputs sent as raw bytes after the JSON (numbers only)."""
    document = json.loads(body[:length])
    out: dict[str, np.ndarray[Any, Any]] = {}
    offset = length
    dtypes = {"FP64": "<f8", "INT64": "<i8"}
    for o in document["outputs"]:
        size = o["parameters"]["binary_data_size"]
        chunk = body[offset : offset + size]
        offset += size
        if o["datatype"] == "BYTES":
            values, at = [], 0
            while at < len(chunk):
                (n,) = struct.unpack_from("<I", chunk, at)
                values.append(chunk[at + 4 : at + 4 + n].decode())
                at += 4 + n
            out[o["name"]] = np.asarray(values, dtype=object)
        else:
            out[o["name"]] = np.frombuffer(chunk, dtype=dtypes[o["datatype"]]).reshape(o["shape"])
    assert offset == len(body)
    return out


def _options(metadata: dict[str, Any]) -> dict[str, bool]:
    offered = {o["name"] for o in metadata["outputs"]}
    return {
        "return_proba": "probabilities" in offered,
        "return_votes": "votes" in offered,
        "return_std": "std" in offered,
    }


def _assert_same(v1: dict[str, Any], v2: dict[str, np.ndarray[Any, Any]], task: str) -> None:
    """/v2's outputs hold exactly /v1's numbers."""
    if task == "classification":
        assert v2["predictions"].tolist() == v1["predictions"]
    else:
        np.testing.assert_array_equal(v2["predictions"], v1["predictions"])
    if "probabilities" in v1:
        np.testing.assert_array_equal(v2["probabilities"], v1["probabilities"])
    if "votes" in v1:
        keys = [str(c) for c in v1["classes"]]
        expected = [[row.get(k, 0) for k in keys] for row in v1["votes"]]
        np.testing.assert_array_equal(v2["votes"], expected)
        np.testing.assert_array_equal(v2["agreement"], v1["agreement"])
    if "std" in v1:
        np.testing.assert_array_equal(v2["std"], v1["std"])
    assert set(v2) == {"predictions"} | {k for k in v1 if k in OUTPUT_KEYS}


OUTPUT_KEYS = {"probabilities", "votes", "agreement", "std"}


@pytest.mark.parametrize(("kind", "task"), cases())
async def test_infer_equals_v1_predict_for_every_kind(api: Api, kind: str, task: str) -> None:
    model = _model(kind, task)
    metadata = (await api.client.get(f"/v2/models/{model}")).json()
    assert [i["name"] for i in metadata["inputs"]] == _frame(task)[1]
    options = _options(metadata)
    if task == "regression":
        assert not options["return_proba"] and not options["return_votes"]
    frame, features = _frame(task)
    v1 = await api.predict(
        model, "latest", {"instances": records(frame, features), "options": options}
    )
    assert v1.status_code == 200, v1.text
    body = {"inputs": _tensors(frame, features), "parameters": options}
    v2 = await api.client.post(f"/v2/models/{model}/versions/1/infer", json=body)
    assert v2.status_code == 200, v2.text
    document = v2.json()
    assert (document["model_name"], document["model_version"]) == (model, "1")
    _assert_same(v1.json(), _outputs(document), task)

    # The same rows as one 2-D FP64 tensor in binary, every output asked by name, binary.
    matrix = frame[features].to_numpy(dtype="<f8")
    wanted = ["predictions"] + [
        name
        for name, option in (
            ("probabilities", "return_proba"),
            ("votes", "return_votes"),
            ("agreement", "return_votes"),
            ("std", "return_std"),
        )
        if options[option]
    ]
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "input-0",
                    "shape": list(matrix.shape),
                    "datatype": "FP64",
                    "parameters": {"binary_data_size": matrix.nbytes},
                }
            ],
            "outputs": [{"name": n} for n in wanted],
            "parameters": {"binary_data_output": True},
        }
    ).encode()
    binary = await api.client.post(
        f"/v2/models/{model}/infer",
        content=header + matrix.tobytes(),
        headers={HEADER: str(len(header)), "Content-Type": "application/octet-stream"},
    )
    assert binary.status_code == 200, binary.text
    length = int(binary.headers[HEADER])
    _assert_same(v1.json(), _binary_outputs(binary.content, length), task)


async def test_metadata_and_readiness(api: Api) -> None:
    client = api.client
    assert (await client.get("/v2")).json()["extensions"] == ["binary_tensor_data"]
    assert (await client.get("/v2/health/live")).json() == {"live": True}
    assert (await client.get("/v2/health/ready")).json() == {"ready": True}
    ready = await client.get("/v2/models/cla-random-forest/versions/latest/ready")
    assert ready.json() == {"name": "cla-random-forest", "version": "1", "ready": True}
    meta = (await client.get("/v2/models/cla-random-forest/versions/1")).json()
    assert meta["versions"] == ["1"] and meta["platform"] == "scikit-learn"
    assert meta["inputs"][0] == {"name": "sepal_length", "datatype": "FP64", "shape": [-1]}
    assert {o["name"]: (o["datatype"], o["shape"]) for o in meta["outputs"]} == {
        "predictions": ("BYTES", [-1]),
        "probabilities": ("FP64", [-1, 3]),
        "votes": ("INT64", [-1, 3]),
        "weighted_votes": ("FP64", [-1, 3]),
        "agreement": ("FP64", [-1]),
        "contributions": ("FP64", [-1, -1, 4]),  # explain: per class, per input column
        "base_values": ("FP64", [-1]),
    }
    assert json.loads(meta["parameters"]["classes"]) == ["setosa", "versicolor", "virginica"]
    reg = (await client.get("/v2/models/reg-random-forest")).json()
    assert {o["name"] for o in reg["outputs"]} == {
        "predictions",
        "std",
        "contributions",
        "base_values",
    }
    coloured = (await client.get("/v2/models/coloured")).json()
    assert coloured["inputs"][-1] == {"name": "colour", "datatype": "BYTES", "shape": [-1]}
    assert "matrix_input" not in coloured["parameters"]


async def test_an_alias_names_a_version(api: Api) -> None:
    aliased = await api.client.put("/v1/models/coloured/aliases/production", json={"version": 1})
    assert aliased.status_code == 200, aliased.text
    ready = await api.client.get("/v2/models/coloured/versions/production/ready")
    assert ready.status_code == 200 and ready.json()["version"] == "1"


async def test_string_features_as_bytes_tensors(api: Api) -> None:
    frame = iris_frame().head(6).assign(colour=["red", "green", "blue", "red", "mauve", "blue"])
    features = [*IRIS_FEATURES, "colour"]
    v1 = await api.predict(
        "coloured", 1, {"instances": records(frame, features), "options": {"return_proba": True}}
    )
    colour = {"name": "colour", "shape": [6, 1], "datatype": "BYTES"}
    inputs = [*_tensors(frame, IRIS_FEATURES), {**colour, "data": frame["colour"].tolist()}]
    body = {"inputs": inputs, "outputs": [{"name": "predictions"}, {"name": "probabilities"}]}
    v2 = await api.client.post("/v2/models/coloured/infer", json=body)
    assert v2.status_code == 200, v2.text
    _assert_same(v1.json(), _outputs(v2.json()), "classification")
    assert "'mauve' at row 4" in v2.json()["parameters"]["warnings"]
    assert v2.json()["parameters"]["warnings"] == "; ".join(v1.json()["warnings"])


async def test_other_numeric_datatypes_are_the_same_numbers(api: Api) -> None:
    frame = iris_frame().head(8)
    as_fp32 = frame[IRIS_FEATURES].astype("float32").astype("float64")
    v1 = await api.predict("cla-bagging", 1, {"instances": records(as_fp32, IRIS_FEATURES)})
    inputs = [
        {"name": f, "shape": [8], "datatype": "FP32", "data": frame[f].tolist()}
        for f in IRIS_FEATURES
    ]
    v2 = await api.client.post("/v2/models/cla-bagging/infer", json={"inputs": inputs})
    assert _outputs(v2.json())["predictions"].tolist() == v1.json()["predictions"]
    ints = [{"name": f, "shape": [2], "datatype": "INT32", "data": [5, 6]} for f in IRIS_FEATURES]
    v2 = await api.client.post("/v2/models/cla-bagging/infer", json={"inputs": ints})
    v1 = await api.predict(
        "cla-bagging", 1, {"instances": {"columns": IRIS_FEATURES, "data": [[5] * 4, [6] * 4]}}
    )
    assert _outputs(v2.json())["predictions"].tolist() == v1.json()["predictions"]


async def _error(api: Api, path: str, body: Any, status: int = 400, **kw: Any) -> str:
    if isinstance(body, bytes):
        response = await api.client.post(path, content=body, **kw)
    else:
        response = await api.client.post(path, json=body, **kw)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    document = response.json()
    assert set(document) == {"error"}
    message: str = document["error"]
    return message


async def test_bad_requests_are_400_naming_the_tensor(api: Api) -> None:
    path = "/v2/models/cla-random-forest/infer"
    good = _tensors(iris_frame().head(2), IRIS_FEATURES)
    assert "not valid JSON" in await _error(api, path, b"{not json")
    unknown = [*good[:3], {**good[3], "name": "petal_wdth"}]
    assert "unknown input 'petal_wdth'" in await _error(api, path, {"inputs": unknown})
    assert "missing input 'petal_width'" in await _error(api, path, {"inputs": good[:3]})
    as_text = [*good[:3], {**good[3], "datatype": "BYTES", "data": ["a", "b"]}]
    message = await _error(api, path, {"inputs": as_text})
    assert message.startswith("input 'petal_width': datatype BYTES, but feature 'petal_width'")
    wide = [*good[:3], {**good[3], "shape": [1, 2]}]
    assert "input 'petal_width': shape must be [n] or [n, 1]" in await _error(
        api, path, {"inputs": wide}
    )
    short = [*good[:3], {**good[3], "shape": [1], "data": [0.2]}]
    assert "input 'petal_width' has 1 rows but input 'sepal_length' has 2" in await _error(
        api, path, {"inputs": short}
    )
    binary = {"name": "petal_width", "shape": [2], "datatype": "FP64"}
    binary["parameters"] = {"binary_data_size": 16}
    header = json.dumps({"inputs": [*good[:3], binary]}).encode()
    missing = header + np.array([0.2, np.nan]).tobytes()  # NaN: a missing value
    message = await _error(api, path, missing, headers={HEADER: str(len(header))})
    assert "input 'petal_width' element 1: column 'petal_width' cannot be missing" in message
    matrix = {"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP64", "data": [1, 2, 3]}]}
    assert "input 'x': shape [1, 3] has 3 columns but the model has 4 features" in await _error(
        api, path, matrix
    )
    asked = {"inputs": good, "outputs": [{"name": "std"}]}
    assert "output 'std': std applies to regression only" in await _error(api, path, asked)
    assert "unknown output 'proba'" in await _error(
        api, path, {"inputs": good, "outputs": [{"name": "proba"}]}
    )
    message = await _error(api, path, {"inputs": good, "parameters": {"return_proba": "yes"}})
    assert message == "parameter 'return_proba' must be true or false, got 'yes'"
    message = await _error(api, path, {"inputs": good, "parameters": {"voting": "loud"}})
    assert message == "parameter 'voting' must be 'hard' or 'soft', got 'loud'"
    message = await _error(
        api,
        "/v2/models/cla-gradient-boosting/infer",
        {"inputs": good, "parameters": {"voting": "soft"}},
    )
    assert "parameter 'voting': gradient_boosting does not combine members by vote" in message


async def test_unknown_models_and_versions_are_404(api: Api) -> None:
    good = {"inputs": _tensors(iris_frame().head(1), IRIS_FEATURES)}
    assert "'nobody'" in await _error(api, "/v2/models/nobody/infer", good, 404)
    message = await _error(api, "/v2/models/cla-bagging/versions/7/infer", good, 404)
    assert "no version 7" in message
    for path in ("/v2/models/nobody", "/v2/models/cla-bagging/versions/nope/ready"):
        response = await api.client.get(path)
        assert response.status_code == 404 and set(response.json()) == {"error"}
    response = await api.client.get("/v2/models/bad%20name")
    assert response.status_code == 400 and "name" in response.json()["error"]


async def test_too_many_rows_is_413(tmp_path_factory: pytest.TempPathFactory) -> None:
    settings = make_settings(tmp_path_factory.mktemp("oip-limits"), max_predict_rows=3)
    async for _, api in started(settings):
        dataset = await api.iris()
        forest = {"kind": "random_forest", "params": {"n_estimators": 3}}
        await api.train("small", {"dataset_id": dataset, "target": "species", "ensemble": forest})
        body = {"inputs": _tensors(iris_frame().head(4), IRIS_FEATURES)}
        message = await _error(api, "/v2/models/small/infer", body, 413)
        assert "4 rows; at most 3 rows per request" in message


async def test_keys_and_roles_as_v1(tmp_path_factory: pytest.TempPathFactory) -> None:
    keys = {"reader": "read"}
    settings = make_settings(tmp_path_factory.mktemp("oip-keys"), api_keys=keys)
    async for _, api in started(settings):
        response = await api.client.get("/v2/health/ready")
        assert response.status_code == 401 and set(response.json()) == {"error"}
        assert response.headers["www-authenticate"].startswith("Bearer")
        response = await api.client.get("/v2", headers={"Authorization": "Bearer nope"})
        assert response.status_code == 401 and response.json() == {"error": "unknown API key"}
        response = await api.client.get("/v2/models/x", headers={"Authorization": "Bearer reader"})
        assert response.status_code == 404
