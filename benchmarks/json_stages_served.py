"""Where a served 10,000-row JSON prediction's time goes, stage by stage, in the server.

``benchmarks/big_bodies.py`` times the stages in process; this one times them in a real
server process (``python -m app`` of ``--tree``, one server process) answering ``make
bench``'s 10,000-row columnar JSON bodies from wrk with one client: the stage functions
of the big-body path are wrapped, in that process, by timers of wall time and of the
calling thread's CPU time (``time.thread_time``):

* on the event loop: the whole request (``RequestMiddleware``), the body read
  (``read_prediction_body``: uvicorn's chunks joined by Starlette);
* in the worker thread: the whole body's answer (``_body_response``), the numbers read
  (``_numeric_request``: simdjson, the rows' shape, exactness), the rows checked
  (``check_rows``), the prediction (``predict_checked``: the engine, on
  ``ENSEMBLE_PREDICT_THREADS`` threads; its thread CPU is the calling thread's part), and
  the prediction with the response written (``_write``).

``--scenario rows_10000_arrow`` does the same for ``make bench``'s 10,000-row Arrow IPC
body (options in the query string): the table read (``read_table_body``) and checked
(``check_table``), the columns stacked into the model's matrix (``Servable.transform``),
and for both bodies the engine's answer, parts joined (``RowParts.answer``; the other
parts' thread CPU is not the calling thread's).

Printed: the median of each over the requests after a warm-up, the server process's CPU
per request (every thread), the wrk p50, and the floor (the stored Pipeline's
``predict_proba`` on the same rows, in this process) for scale.  Stages a tree does not
have are skipped.  A wrapped function costs ~1 us.  Linux only (/proc); needs wrk.

    .venv/bin/python benchmarks/json_stages_served.py [--tree .] [--model bench-xgboost]
        [--seconds 10] [--scenario rows_10000_arrow]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT_ENV = "JSON_STAGES_OUT"  # where the server process writes its timings
# (module, attribute, label); a method as "Class.method".
STAGES = [
    ("app.middleware", "RequestMiddleware.observe", "loop: whole request"),
    ("app.routes.predictions", "read_prediction_body", "loop: body read"),
    ("app.services.predictions", "_body_response", "thread: whole answer"),
    ("app.services.predictions", "_numeric_request", "thread: numbers read"),
    ("app.services.predictions", "check_rows", "thread: rows checked"),
    ("app.services.predictions", "predict_checked", "thread: prediction"),
    ("app.services.predictions", "_write", "thread: prediction + response"),
    ("ensembles.inference.row_parts", "RowParts.answer", "thread: engine (parts joined)"),
]
# The same for an Arrow IPC body (``--scenario rows_10000_arrow``).
TABLE_STAGES = [
    ("app.middleware", "RequestMiddleware.observe", "loop: whole request"),
    ("app.routes.predictions", "read_prediction_body", "loop: body read"),
    ("app.services.predictions", "_table_response", "thread: whole answer"),
    ("app.services.predictions", "read_table_body", "thread: table read"),
    ("app.services.predictions", "check_table", "thread: table checked"),
    ("app.services.predictions", "predict_checked", "thread: prediction"),
    ("app.services.predictions", "_write", "thread: prediction + response"),
    ("ensembles.inference.servable", "Servable.transform", "thread: columns stacked"),
    ("ensembles.inference.row_parts", "RowParts.answer", "thread: engine (parts joined)"),
]
STAGES_ENV = "JSON_STAGES_TABLE"  # set: the table body's stages


# --------------------------------------------------------------------- in the server


def _timed(func: Callable[..., Any], label: str, record: Callable[..., None]) -> Any:
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return await func(*args, **kwargs)
            finally:
                record(label, time.perf_counter() - wall, time.thread_time() - cpu, args)

        return timed_async

    @functools.wraps(func)
    def timed(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            record(label, time.perf_counter() - wall, time.thread_time() - cpu, args)

    return timed


def serve() -> None:
    """The server process: the stage functions wrapped, then ``python -m app``."""
    import importlib

    out = Path(os.environ[OUT_ENV])
    times: dict[str, list[tuple[float, float]]] = {}
    lock = threading.Lock()

    def record(label: str, wall: float, cpu: float, args: tuple[Any, ...]) -> None:
        if label == "loop: whole request":
            scope = args[1]
            if scope.get("type") != "http" or not scope["path"].endswith("/predict"):
                return
        with lock:
            times.setdefault(label, []).append((wall, cpu))

    def write_out() -> None:  # twice a second, off the request path
        while True:
            time.sleep(0.5)
            with lock:
                text = json.dumps(times)
            partial = out.with_suffix(".partial")  # renamed whole: never read half-written
            partial.write_text(text)
            partial.replace(out)

    threading.Thread(target=write_out, daemon=True, name="stages-out").start()

    for module_name, attribute, label in TABLE_STAGES if os.environ.get(STAGES_ENV) else STAGES:
        module = importlib.import_module(module_name)
        owner: Any = module
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        func = getattr(owner, name, None)
        if func is not None:
            setattr(owner, name, _timed(func, label, record))
    from app.__main__ import main

    main()


# --------------------------------------------------------------------- the driver


@contextlib.contextmanager
def profiled_service(tree: Path, folder: Path, out: Path, table: bool) -> Iterator[tuple[str, int]]:
    """This script's ``serve()`` of ``tree`` on ``folder``'s data: (base URL, pid)."""
    import json_rows_ab as ab

    command = [sys.executable, str(Path(__file__).resolve()), "--serve"]
    env = {OUT_ENV: str(out), **({STAGES_ENV: "1"} if table else {})}
    with ab.tree_service(tree, folder, "profiled.log", command, env) as served:
        yield served


def main() -> None:
    if "--serve" in sys.argv:
        serve()
        return
    sys.path.insert(0, str(HERE))
    import httpx
    import json_rows_ab as ab
    import numpy as np
    import service_bench as sb
    from loadgen import LoadGenerator, find_wrk
    from serving_cpu_ab import cpu_seconds

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(HERE.parent))
    parser.add_argument("--model", default="bench-xgboost")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--scenario", default="rows_10000", choices=["rows_10000", "rows_10000_arrow"]
    )
    args = parser.parse_args()
    table = args.scenario.endswith("_arrow")
    ref = next(r for r in sb.REFERENCES if r.model == args.model)
    wrk, how = find_wrk()
    load = LoadGenerator(wrk)
    data = sb.load_dataset(ref.dataset)
    tree = Path(args.tree)
    with tempfile.TemporaryDirectory(prefix="json-stages-") as tmp:
        folder, out = Path(tmp), Path(tmp) / "stages.json"
        with (
            ab.tree_service(tree, folder, "train.log") as (base, _),
            httpx.Client(base_url=base, timeout=120) as client,
        ):
            path, _, pipeline = ab.trained(client, ref, data)
        work = sb.workloads(data, True, np.random.default_rng(sb.SEED))[args.scenario]
        with profiled_service(tree, folder, out, table) as (base, pid):
            url = f"{base}{path}/predict{work.query}"
            load.run(url, work.bodies, 1, 2, work.content_type)  # the model loaded, warm
            time.sleep(1.0)  # the server's timings written
            warm = len(json.loads(out.read_text())["loop: whole request"])
            before = cpu_seconds(pid)
            run = load.run(url, work.bodies, 1, args.seconds, work.content_type)
            cpu = (cpu_seconds(pid) - before) / max(run.requests, 1) * 1e3
            time.sleep(1.0)
            times = json.loads(out.read_text())
    load.close()
    floor = []
    for i in range(50):
        started = time.perf_counter()
        pipeline.predict_proba(work.frames[i % len(work.frames)])
        floor.append(time.perf_counter() - started)
    body = "an Arrow IPC stream" if table else "JSON"
    print(f"{args.model}, 10,000 rows as {body}, 1 client ({how}); tree {tree}")
    print(f"load average {os.getloadavg()[0]:.2f}; {run.requests} requests timed\n")
    print("| stage | wall p50 ms | thread CPU p50 ms |\n|---|---:|---:|")
    for _, _, label in TABLE_STAGES if table else STAGES:
        values = times.get(label, [])[warm:]
        if values:
            wall = statistics.median(w for w, _ in values) * 1e3
            used = statistics.median(c for _, c in values) * 1e3
            print(f"| {label} | {wall:.2f} | {used:.2f} |")
    print(f"\nserver process CPU per request (every thread): {cpu:.2f} ms")
    print(f"wrk p50: {run.latency_ms['p50']:.2f} ms")
    print(f"floor (predict_proba in this process) p50: {statistics.median(floor) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
