"""Adaptive batching behind a real uvicorn: concurrent requests on their own connections
(JSON and Arrow, one of them bad) get exactly the answers they get one at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pyarrow as pa

from tests.api.test_predict_tables import ARROW, arrow_stream
from tests.e2e.server import Server

TABLE = {
    "columns": ["a", "b", "label"],
    "rows": [[i % 7 + 0.5, (i * 3) % 11 + 0.25, "xy"[i % 2]] for i in range(120)],
}
PREDICT = "/v1/models/m/versions/1/predict"
CLIENTS = 16


def bodies() -> list[tuple[dict[str, str], bytes]]:
    """One request per client: one-row JSON bodies, two Arrow tables, one bad row."""
    json_type = {"content-type": "application/json"}
    out = []
    for i in range(CLIENTS):
        row = {"a": 0.5 + i % 7, "b": 0.25 + (i * 5) % 11}
        body = httpx.Request(
            "POST", "/", json={"instances": [row], "options": {"return_proba": True}}
        )
        out.append((json_type, body.read()))
    table = pa.table({"a": [1.5, 2.5], "b": [3.25, 0.25]})
    out[3] = ({"content-type": ARROW}, arrow_stream(table))
    out[11] = ({"content-type": ARROW}, arrow_stream(table.slice(1)))
    out[7] = (json_type, b'{"instances": [{"a": "oops", "b": 1.0}]}')
    return out


def url_for(headers: dict[str, str]) -> str:
    """Table bodies ask for probabilities in the query, JSON ones in the body."""
    return PREDICT + ("?return_proba=true" if headers["content-type"] == ARROW else "")


async def answers(url: str, sent: list[tuple[dict[str, str], bytes]]) -> list[httpx.Response]:
    """All requests at once, each client on its own connection."""
    clients = [httpx.AsyncClient(base_url=url, timeout=60) for _ in sent]
    try:
        return await asyncio.gather(
            *(
                client.post(url_for(h), content=body, headers=h)
                for client, (h, body) in zip(clients, sent, strict=True)
            )
        )
    finally:
        for client in clients:
            await client.aclose()


def batch_requests(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("ensemble_batch_requests_sum "):
            return float(line.split()[1])
    raise AssertionError("no ensemble_batch_requests_sum in /metrics")


def test_concurrent_requests_get_the_answers_they_get_alone(
    servers: Callable[..., Server],
) -> None:
    server = servers()
    sent = bodies()
    with httpx.Client(base_url=server.url, timeout=120) as client:
        dataset = client.post("/v1/datasets", json=TABLE).json()["id"]
        spec: dict[str, Any] = {
            "dataset_id": dataset,
            "target": "label",
            "ensemble": {"kind": "random_forest", "params": {"n_estimators": 20}},
            "random_state": 3,
        }
        trained = client.post("/v1/models/m/versions?wait=true", json=spec)
        assert trained.status_code == 201, trained.text
        alone = [client.post(url_for(h), content=body, headers=h) for h, body in sent]
        counted = batch_requests(client)
        for _ in range(3):
            together = asyncio.run(answers(server.url, sent))
            for one, joined in zip(alone, together, strict=True):
                assert joined.status_code == one.status_code
                if one.status_code == 200:
                    assert joined.content == one.content  # byte for byte
                else:  # a problem names its own request
                    assert joined.json()["errors"] == one.json()["errors"]
        assert together[7].status_code == 422
        assert together[7].json()["errors"][0]["loc"] == ["instances", 0, "a"]
        # Every good request was answered by an engine call, counted once.
        assert batch_requests(client) - counted == 3 * (CLIENTS - 1)
