"""What routing through a weighted alias and feeding a shadow cost a caller: one-row
predictions of an iris forest by version number, through a weighted alias with a routing
key, and through an alias whose shadow is a forest ten times bigger, as the service
answers them (the app in process, over httpx's ASGI transport, so no network in the
figures).

    .venv/bin/python benchmarks/rollout_bench.py [--requests 500] [--trees 50]

Prints the median and 95th percentile latency per way, in milliseconds, then the shadow's
counts (requests it answered, requests dropped because its queue was full). A few tens of
seconds in one process; the data folder is temporary.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from sklearn.datasets import load_iris

from app.main import create_app
from app.settings import Settings

_IRIS = load_iris(as_frame=True).frame
FEATURES = [str(c) for c in _IRIS.columns if c != "target"]
ROW = {"instances": [dict(zip(FEATURES, _IRIS[FEATURES].iloc[0].tolist(), strict=True))]}


async def _train(client: httpx.AsyncClient, dataset: str, trees: int) -> None:
    body = {
        "dataset_id": dataset,
        "target": "target",
        "ensemble": {"kind": "random_forest", "params": {"n_estimators": trees}},
        "random_state": 0,
    }
    response = await client.post("/v1/models/iris/versions?wait=true", json=body)
    response.raise_for_status()


async def _latencies(
    client: httpx.AsyncClient, ref: str, n: int, keyed: bool = False
) -> list[float]:
    took = []
    for i in range(n):
        headers = {"X-Routing-Key": f"customer-{i}"} if keyed else {}
        start = time.perf_counter()
        response = await client.post(
            f"/v1/models/iris/versions/{ref}/predict", json=ROW, headers=headers
        )
        took.append((time.perf_counter() - start) * 1000)
        response.raise_for_status()
    return took


def _line(name: str, took: list[float]) -> str:
    ranked = sorted(took)
    p95 = ranked[int(0.95 * (len(ranked) - 1))]
    return f"{name:<34} median {statistics.median(took):6.2f} ms   p95 {p95:6.2f} ms"


async def main(requests: int, trees: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        app = create_app(Settings(data_dir=Path(folder)))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                table = {"name": "iris", "columns": [*FEATURES, "target"]}
                table["rows"] = _IRIS.to_numpy().tolist()
                dataset = (await client.post("/v1/datasets", json=table)).json()["id"]
                for n in (trees, trees, trees * 10):
                    await _train(client, dataset, n)
                await _set(client, "split", {"versions": {"1": 0.5, "2": 0.5}})
                await _set(client, "shadowed", {"version": 1, "shadow": 3})
                ways: list[tuple[str, str, bool]] = [
                    ("by number (v1)", "1", False),
                    ("weighted alias, routing key", "split", True),
                    ("alias with a 10x shadow", "shadowed", False),
                ]
                for _, ref, keyed in ways:  # warm: models loaded, references resolved
                    await _latencies(client, ref, 20, keyed)
                await _set(client, "shadowed", {"version": 1, "shadow": 2})
                await _set(client, "shadowed", {"version": 1, "shadow": 3})  # counts from 0
                for name, ref, keyed in ways:
                    print(_line(name, await _latencies(client, ref, requests, keyed)))
                await asyncio.sleep(1.0)
                stats = (await client.get("/v1/models/iris/aliases/shadowed/shadow")).json()
                print(
                    f"shadow: {stats['requests']} answered, {stats['dropped']} dropped, "
                    f"{stats['errors']} errors, label agreement {stats['label_agreement']}"
                )


async def _set(client: httpx.AsyncClient, alias: str, body: dict[str, Any]) -> None:
    response = await client.put(f"/v1/models/iris/aliases/{alias}", json=body)
    response.raise_for_status()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--trees", type=int, default=50)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.requests, arguments.trees))
