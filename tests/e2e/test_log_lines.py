"""The log of a real server is one JSON object per line, numpy's warnings included.

A regression target in the 1e160s makes numpy overflow for real, with no hook of ours:
the training worker squares the errors of its scores, the server process the spread of
the members' predictions (``return_std``). Each such ``RuntimeWarning`` must reach the
log as a JSON line of the ``py.warnings`` logger, not as Python's raw two-line warning.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.e2e.server import Server

TABLE = {
    "columns": ["x", "z", "y"],
    "rows": [[float(i), float(i * 7 % 5), (1 + i * 7 % 13) * 1e160] for i in range(60)],
}
MEMBERS = [{"name": "lr", "kind": "linear_regression"}, {"name": "knn", "kind": "knn"}]


def _overflows(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in lines if e["logger"] == "py.warnings" and "RuntimeWarning" in e["message"]]


def test_numpy_warnings_in_server_and_worker_are_json_lines(
    servers: Callable[..., Server],
) -> None:
    server = servers()
    with server.client() as client:
        uploaded = client.post("/v1/datasets", json={"name": "huge", **TABLE})
        assert uploaded.status_code == 201, uploaded.text
        spec = {
            "dataset_id": uploaded.json()["id"],
            "target": "y",
            "task": "regression",
            "ensemble": {"kind": "voting", "estimators": MEMBERS},
            "random_state": 0,
        }
        trained = client.post("/v1/models/huge/versions?wait=true", json=spec)
        assert trained.status_code == 201, trained.text
        rows = [{"x": float(i), "z": 1.0} for i in range(0, 60, 7)]
        body = {"instances": rows, "options": {"return_std": True}}
        predicted = client.post("/v1/models/huge/versions/1/predict", json=body)
        assert predicted.status_code == 200, predicted.text
    assert server.stop() == 0
    text = server.log_path.read_text()
    raw = [line for line in text.splitlines() if not line.startswith("{")]
    assert raw == []
    lines = [json.loads(line) for line in text.splitlines()]
    warned_in = {e["pid"] for e in _overflows(lines)}
    assert server.pid in warned_in, "no overflow of the server process was logged"
    assert warned_in - {server.pid}, "no overflow of the training worker was logged"
