"""Clients nobody here wrote, against a real server: Triton's ``tritonclient[http]`` and
KServe's SDK (its REST client and its protocol data models, in a virtualenv of its own:
see tests/e2e/toolenv.py) speak the Open Inference Protocol to ``uvicorn`` on loopback,
and get what ``/v1`` predict answers for the same rows."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from tests.api.support import IRIS_FEATURES, diabetes_frame, iris_frame
from tests.e2e.server import Server
from tests.e2e.toolenv import tool_python

KEY = "oip-reader"
ADMIN = "oip-admin"
DIABETES_FEATURES = [c for c in diabetes_frame().columns if c != "progression"]
ROWS = iris_frame().sample(25, random_state=5)
COLOURS = np.array(["red", "green", "blue", "mauve", "red"] * 5, dtype=object)


def _train(client: httpx.Client, model: str, body: dict[str, Any]) -> None:
    response = client.post(f"/v1/models/{model}/versions?wait=true", json=body, timeout=180)
    assert response.status_code == 201, response.text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with keys (a reader's is what the clients present) and three models: iris
    (numeric features), iris with a string feature, diabetes (regression)."""
    folder = tmp_path_factory.mktemp("oip-e2e")
    keys = f"{KEY}:read,{ADMIN}:admin"
    running = Server(folder / "data", folder / "server.log", ENSEMBLE_API_KEYS=keys).start()
    try:
        with httpx.Client(
            base_url=running.url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60
        ) as client:
            frames = {
                "iris": iris_frame(),
                "coloured": iris_frame().assign(colour=["red", "green", "blue"] * 50),
                "diabetes": diabetes_frame(),
            }
            ids = {}
            for name, frame in frames.items():
                body = {
                    "name": name,
                    "columns": list(frame.columns),
                    "rows": frame.to_numpy().tolist(),
                }
                response = client.post("/v1/datasets", json=body)
                assert response.status_code == 201, response.text
                ids[name] = response.json()["id"]
            forest = {"kind": "random_forest", "params": {"n_estimators": 7}}
            for model, dataset in (("iris-clf", "iris"), ("coloured", "coloured")):
                body = {"dataset_id": ids[dataset], "target": "species", "ensemble": forest}
                _train(client, model, {**body, "random_state": 1})
            bagging = {"kind": "bagging", "params": {"n_estimators": 5}}
            body = {"dataset_id": ids["diabetes"], "target": "progression", "ensemble": bagging}
            _train(client, "diabetes", {**body, "random_state": 1})
        yield running
    finally:
        running.stop()


def _auth() -> dict[str, str]:
    """A new dict per call: tritonclient adds its own headers to the dict it is given."""
    return {"Authorization": f"Bearer {KEY}"}


def _v1(server: Server, model: str, frame: Any, features: list[str], **options: Any) -> Any:
    rows = frame[features].to_dict(orient="records")
    with server.client() as client:
        response = client.post(
            f"/v1/models/{model}/versions/latest/predict",
            json={"instances": rows, "options": options},
            headers=_auth(),
        )
    assert response.status_code == 200, response.text
    return response.json()


def _triton(server: Server) -> triton.InferenceServerClient:
    return triton.InferenceServerClient(url=server.url.removeprefix("http://"))


def _inputs(frame: Any, features: list[str], binary: bool) -> list[triton.InferInput]:
    inputs = []
    for name in features:
        tensor = triton.InferInput(name, [len(frame)], "FP64")
        tensor.set_data_from_numpy(frame[name].to_numpy(dtype=np.float64), binary_data=binary)
        inputs.append(tensor)
    return inputs


def test_triton_health_metadata_and_readiness(server: Server) -> None:
    client = _triton(server)
    assert client.is_server_live(headers=_auth())
    assert client.is_server_ready(headers=_auth())
    assert client.is_model_ready("iris-clf", headers=_auth())
    assert client.is_model_ready("iris-clf", "1", headers=_auth())
    assert not client.is_model_ready("no-such-model", headers=_auth())
    assert not client.is_server_ready()  # no key: 401, not ready for this caller
    metadata = client.get_server_metadata(headers=_auth())
    assert "binary_tensor_data" in metadata["extensions"]
    model = client.get_model_metadata("iris-clf", headers=_auth())
    assert [i["name"] for i in model["inputs"]] == IRIS_FEATURES
    assert {o["name"] for o in model["outputs"]} >= {"predictions", "probabilities", "votes"}
    with pytest.raises(InferenceServerException, match="not found"):
        client.get_model_metadata("no-such-model", headers=_auth())


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_triton_infer_equals_v1(server: Server, binary: bool) -> None:
    client = _triton(server)
    expected = _v1(server, "iris-clf", ROWS, IRIS_FEATURES, return_proba=True, return_votes=True)
    outputs = [
        triton.InferRequestedOutput(name, binary_data=binary)
        for name in ("predictions", "probabilities", "votes", "agreement")
    ]
    result = client.infer(
        "iris-clf", _inputs(ROWS, IRIS_FEATURES, binary), outputs=outputs, headers=_auth()
    )
    labels = [v.decode() if isinstance(v, bytes) else v for v in result.as_numpy("predictions")]
    assert labels == expected["predictions"]
    np.testing.assert_array_equal(result.as_numpy("probabilities"), expected["probabilities"])
    classes = json.loads(result.get_output("probabilities")["parameters"]["classes"])
    assert classes == expected["classes"]
    votes = [[row.get(c, 0) for c in classes] for row in expected["votes"]]
    np.testing.assert_array_equal(result.as_numpy("votes"), votes)
    np.testing.assert_array_equal(result.as_numpy("agreement"), expected["agreement"])


def test_triton_all_outputs_binary_by_default_and_one_2d_tensor(server: Server) -> None:
    """No outputs named: tritonclient asks for every output as binary data."""
    client = _triton(server)
    frame = diabetes_frame().head(12)
    expected = _v1(server, "diabetes", frame, DIABETES_FEATURES, return_std=True)
    matrix = triton.InferInput("input-0", [12, len(DIABETES_FEATURES)], "FP64")
    matrix.set_data_from_numpy(frame[DIABETES_FEATURES].to_numpy(dtype=np.float64))
    result = client.infer("diabetes", [matrix], headers=_auth(), parameters={"return_std": True})
    assert result.get_output("predictions")["parameters"]["binary_data_size"] == 12 * 8
    np.testing.assert_array_equal(result.as_numpy("predictions"), expected["predictions"])
    np.testing.assert_array_equal(result.as_numpy("std"), expected["std"])


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_triton_string_inputs_as_bytes(server: Server, binary: bool) -> None:
    client = _triton(server)
    frame = ROWS.assign(colour=COLOURS)
    features = [*IRIS_FEATURES, "colour"]
    expected = _v1(server, "coloured", frame, features, return_proba=True)
    colour = triton.InferInput("colour", [len(frame), 1], "BYTES")
    colour.set_data_from_numpy(COLOURS.reshape(-1, 1), binary_data=binary)
    inputs = [*_inputs(frame, IRIS_FEATURES, binary), colour]
    outputs = [
        triton.InferRequestedOutput(n, binary_data=binary) for n in ("predictions", "probabilities")
    ]
    result = client.infer("coloured", inputs, outputs=outputs, headers=_auth())
    labels = [v.decode() if isinstance(v, bytes) else v for v in result.as_numpy("predictions")]
    assert labels == expected["predictions"]
    np.testing.assert_array_equal(result.as_numpy("probabilities"), expected["probabilities"])
    assert "'mauve'" in result.get_response()["parameters"]["warnings"]


def test_triton_bad_tensors_raise_the_servers_message(server: Server) -> None:
    client = _triton(server)
    inputs = _inputs(ROWS, IRIS_FEATURES, False)[:3]
    with pytest.raises(InferenceServerException, match="missing input 'petal_width'") as caught:
        client.infer("iris-clf", inputs, headers=_auth())
    assert caught.value.status() == "400"
    wrong = triton.InferInput("petal_width", [len(ROWS)], "BOOL")
    wrong.set_data_from_numpy(np.ones(len(ROWS), dtype=bool))
    with pytest.raises(InferenceServerException, match="input 'petal_width': datatype BOOL"):
        client.infer("iris-clf", [*inputs, wrong], headers=_auth())
    with pytest.raises(InferenceServerException, match="not found") as caught:
        client.infer("nobody", _inputs(ROWS, IRIS_FEATURES, True), headers=_auth())
    assert caught.value.status() == "404"


def _kserve(
    server: Server, model: str, frame: Any, features: list[str], options: dict[str, Any]
) -> Any:
    job = {
        "features": features,
        "rows": frame[features].to_numpy().tolist(),
        "options": options,
        "headers": _auth(),
    }
    script = Path(__file__).with_name("kserve_client.py")
    done = subprocess.run(
        [str(tool_python("kserve")), str(script), server.url, model],
        input=json.dumps(job), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("iris-clf", {"return_proba": True, "return_votes": True}),
        ("diabetes", {"return_std": True}),
    ],
)
def test_kserve_client_and_models(server: Server, model: str, options: dict[str, Any]) -> None:
    features = IRIS_FEATURES if model == "iris-clf" else DIABETES_FEATURES
    frame = ROWS if model == "iris-clf" else diabetes_frame().head(20)
    expected = _v1(server, model, frame, features, **options)
    got = _kserve(server, model, frame, features, options)
    assert (got["live"], got["ready"], got["model_ready"]) == (True, True, True)
    assert got["unknown_model_ready"] is False
    assert got["json_id"] == "kserve-json"
    for answer in (got["json"], got["binary"]):
        labels = [v.decode() if isinstance(v, bytes) else v for v in answer["predictions"]]
        if model == "iris-clf":
            assert labels == expected["predictions"]
            np.testing.assert_array_equal(answer["probabilities"], expected["probabilities"])
            np.testing.assert_array_equal(answer["agreement"], expected["agreement"])
            classes = expected["classes"]
            votes = [[row.get(c, 0) for c in classes] for row in expected["votes"]]
            np.testing.assert_array_equal(answer["votes"], votes)
        else:
            np.testing.assert_array_equal(answer["predictions"], expected["predictions"])
            np.testing.assert_array_equal(answer["std"], expected["std"])
    assert "weighted_votes" in got["binary"] or model == "diabetes"
    assert got["error"]["status"] == 400
    assert f"missing input '{features[1]}'" in got["error"]["message"]
