"""Where one one-row request's microseconds go, stage by stage, in process: the requests
go through the service's HTTP protocol fed by ``one_row_loop.py``'s stand-in transport
(no sockets), and chosen functions on the path are wrapped with a ``perf_counter_ns``
timer (inclusive: a stage's figure holds the stages it calls).  Printed per stage: the
calls per request and the median and 20th percentile of its calls' wall microseconds
(a busy host moves the tail, hardly the low quantiles), beside the CPU per request of
the whole loop without the timers.  The timers cost about 0.2 us a call.

    PYTHONPATH=. .venv/bin/python benchmarks/one_row_split.py --data /tmp/tree-cpu-ab \
        [--model bench-rf] [--requests 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import inspect
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

_UVICORN = "uvicorn.protocols.http.httptools_impl"
# (module, attribute path, label): the stages, outermost first.
STAGES: tuple[tuple[str, str, str], ...] = (
    (
        "uvicorn.protocols.http.httptools_impl",
        "HttpToolsProtocol.data_received",
        "parse (httptools, scope, Task)",
    ),
    ("app.front", "Front.serve", "app: front door serve (after served())"),
    ("app.fast_predict", "FastPredictMiddleware.served", "  door: served()"),
    ("app.middleware", "RequestMiddleware._record", "  metrics + access line"),
    ("app.fast_predict", "_read_body", "  body read"),
    ("app.services.predictions", "predict_version", "  predict_version"),
    ("app.services.predictions", "_parse", "    JSON parse (orjson + pydantic)"),
    ("app.services.routing", "target_inline", "    version resolved (registry memory)"),
    ("ensembles.registry.changes", "ChangeCounter._read", "      SQLite data_version read"),
    ("ensembles.inference.rows", "check_rows", "    rows checked"),
    ("app.batching", "Batcher.predict", "    batcher + prediction"),
    ("ensembles.inference.servable", "Servable.predict", "      Servable.predict"),
    ("ensembles.inference.compiled", "CompiledModel.answer", "        engine answer"),
    ("ensembles.inference.gtil", "gtil_scores", "          trees (GTIL call)"),
    ("app.metrics", "Metrics.observe_prediction", "    prediction counters"),
    ("orjson", "dumps", "    response JSON (orjson.dumps)"),
    (_UVICORN, "RequestResponseCycle.send", "  uvicorn send (x2)"),
)


def _wrap(module_name: str, path: str, record: Callable[[str, int], None], label: str) -> None:
    module = importlib.import_module(module_name)
    *owners, name = path.split(".")
    owner: Any = module
    for part in owners:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    clock = time.perf_counter_ns
    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return await original(*args, **kwargs)
            finally:
                record(label, clock() - start)

        wrapped: Any = timed_async
    else:

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                record(label, clock() - start)

        wrapped = timed
    setattr(owner, name, wrapped)
    # Modules that imported the function by name get the timed one too.
    if not owners:
        for other in list(sys.modules.values()):
            if getattr(other, "__name__", "").startswith(("app", "ensembles")) and (
                getattr(other, name, None) is original
            ):
                setattr(other, name, wrapped)


async def measure(data: Path, model: str, requests: int, timed: bool) -> dict[str, Any]:
    import service_bench as sb
    from one_row_loop import connected, requests_on_the_wire

    import app.fast_predict
    import app.services.predictions
    import app.services.routing  # noqa: F401  (imported before the timers are put in)
    from app.main import create_app
    from app.settings import Settings

    durations: dict[str, list[int]] = {}

    def record(label: str, ns: int) -> None:
        durations.setdefault(label, []).append(ns)

    if timed:
        for module, path, label in STAGES:
            _wrap(module, path, record, label)
    version = json.loads((data / f"{model}.json").read_text())["version"]
    lifespan, connections = await connected(create_app(Settings(data_dir=data / "data")), 1)
    ref = next(r for r in sb.REFERENCES if r.model == model)
    work = sb.workloads(
        sb.load_dataset(ref.dataset),
        ref.task == "classification",
        np.random.default_rng(sb.SEED),
    )
    chosen = work["single_1"]
    path = f"/v1/models/{model}/versions/{version}/predict{chosen.query}"
    wires = requests_on_the_wire(path, chosen)
    protocol, transport = connections[0]

    async def round_trips(count: int) -> None:
        for k in range(count):
            protocol.data_received(wires[k % len(wires)])
            while not transport.answers:
                await asyncio.sleep(0)
            answer = transport.answers.pop()
            if not answer.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(answer[:300].decode())
            await asyncio.sleep(0)

    await round_trips(500)
    durations.clear()
    started = time.process_time()
    await round_trips(requests)
    cpu = (time.process_time() - started) / requests * 1e6
    await lifespan.shutdown()
    return {"cpu_us": cpu, "durations": durations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/tree-cpu-ab")
    parser.add_argument("--model", default="bench-rf")
    parser.add_argument("--requests", type=int, default=4000)
    args = parser.parse_args()
    import uvloop

    plain = uvloop.run(measure(Path(args.data), args.model, args.requests, timed=False))
    found = uvloop.run(measure(Path(args.data), args.model, args.requests, timed=True))
    print(f"{args.model}, 1 client, {args.requests} requests")
    print(f"CPU per request, no timers: {plain['cpu_us']:.1f} us; with them {found['cpu_us']:.1f}")
    print("| stage | calls/request | p20 us | p50 us |")
    print("|---|---:|---:|---:|")
    for _, _, label in STAGES:
        values = found["durations"].get(label, [])
        if not values:
            print(f"| {label} | 0 | - | - |")
            continue
        p20, p50 = np.percentile(values, [20, 50]) / 1000
        print(f"| {label} | {len(values) / args.requests:.2f} | {p20:.1f} | {p50:.1f} |")


if __name__ == "__main__":
    main()
