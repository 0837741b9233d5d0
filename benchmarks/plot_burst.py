"""Does one slow report stall every plot? A real service (``python -m app``: uvicorn on
127.0.0.1) with a 1,000-class forest and a small iris forest; it prints

1. the first (uncached) report of the 1,000-class version, then its confusion matrix as
   PNG (not drawn by the report) and as SVG, each alone;
2. small-plot latency (iris plots in turn, SVG and PNG) with nothing else running;
3. the same while 16 clients ask at once for the report of another 1,000-class version
   (never drawn before), and how long the burst took.

    .venv/bin/python benchmarks/plot_burst.py [--code /work/main] [--reports 16]

``--code`` serves another checkout's code (``/work/main``: the figures before a change)
with this script's client. Bounded: ``--max-seconds`` caps the burst (reports not done
then are counted, not waited for), and each request has a timeout. A few minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SMALL_PLOTS = ("oob_curve", "members", "confusion_matrix", "feature_importances")
FORMATS = ("image/svg+xml", "image/png")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def service(code: Path, folder: Path) -> Iterator[str]:
    """``python -m app`` from ``code`` on a free loopback port; yields its base URL."""
    port = free_port()
    env = {**os.environ, "ENSEMBLE_DATA_DIR": str(folder / "data"), "ENSEMBLE_WORKERS": "1",
           "HOST": "127.0.0.1", "PORT": str(port), "PYTHONPATH": str(code),
           "ENSEMBLE_WAIT_TIMEOUT_S": "600"}  # fmt: skip
    env.pop("ENSEMBLE_API_KEYS", None)
    log_path = folder / "service.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], cwd=code, env=env, stdout=log, stderr=log
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while not _ready(base):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the service did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        yield base
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _ready(base: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"{base}/readyz", timeout=1).status_code == 200
    return False


def many_classes(classes: int, rows_per_class: int) -> dict[str, Any]:
    """A table of ``classes`` classes, ``rows_per_class`` rows each, four numeric columns."""
    rng = np.random.default_rng(0)
    y = np.arange(classes * rows_per_class) % classes
    x = rng.normal(size=(len(y), 4)) + y[:, None] * 0.01
    rows = [[*map(float, r), f"c{label}"] for r, label in zip(x, y, strict=True)]
    return {"name": "many", "columns": ["a", "b", "c", "d", "label"], "rows": rows}


def iris() -> dict[str, Any]:
    from sklearn.datasets import load_iris

    frame = load_iris(as_frame=True).frame
    rows = [[*map(float, r[:-1]), f"k{int(r[-1])}"] for r in frame.to_numpy()]
    return {"name": "iris", "columns": [*frame.columns[:-1], "species"], "rows": rows}


def train(client: httpx.Client, model: str, table: dict[str, Any], target: str) -> None:
    uploaded = client.post("/v1/datasets", json=table)
    uploaded.raise_for_status()
    body = {"dataset_id": uploaded.json()["id"], "target": target, "random_state": 0,
            "ensemble": {"kind": "random_forest", "params": {"n_estimators": 10}}}  # fmt: skip
    done = client.post(f"/v1/models/{model}/versions?wait=true", json=body, timeout=900)
    if done.status_code != 201:
        raise RuntimeError(f"training {model}: {done.status_code} {done.text[:500]}")


def timed_get(client: httpx.Client, path: str, accept: str = "*/*") -> float:
    start = time.perf_counter()
    response = client.get(path, headers={"Accept": accept}, timeout=600)
    response.raise_for_status()
    return time.perf_counter() - start


def percentiles(label: str, seconds: list[float]) -> None:
    if not seconds:
        print(f"{label:44} no request finished")
        return
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(
        f"{label:44} n={len(ordered):3}  p50 {statistics.median(ordered):7.3f} s  "
        f"p95 {p95:7.3f} s  max {ordered[-1]:7.3f} s"
    )


async def small_plots(base: str, stop: asyncio.Event, out: list[float]) -> None:
    """Small plots one after another, each kind and format in turn, until ``stop``."""
    async with httpx.AsyncClient(base_url=base, timeout=600) as client:
        i = 0
        while not stop.is_set():
            name, accept = SMALL_PLOTS[i % 4], FORMATS[(i // 4) % 2]
            start = time.perf_counter()
            response = await client.get(f"/v1/models/small/versions/1/plots/{name}",
                                        headers={"Accept": accept})  # fmt: skip
            response.raise_for_status()
            out.append(time.perf_counter() - start)
            i += 1
            await asyncio.sleep(0.05)


async def burst(base: str, reports: int, max_seconds: float) -> None:
    """``reports`` clients at once asking for an undrawn report, small plots timed meanwhile."""
    latencies: list[float] = []
    stop = asyncio.Event()
    probe = asyncio.create_task(small_plots(base, stop, latencies))
    await asyncio.sleep(0.5)
    async with httpx.AsyncClient(base_url=base, timeout=max_seconds + 30) as client:
        start = time.perf_counter()
        asked = [
            asyncio.create_task(client.get("/v1/models/many/versions/2/report"))
            for _ in range(reports)
        ]
        done, pending = await asyncio.wait(asked, timeout=max_seconds)
        took = time.perf_counter() - start
        for task in pending:
            task.cancel()
        stop.set()
        await probe
    ok = sum(1 for t in done if not t.exception() and t.result().status_code == 200)
    percentiles(f"small plot during {reports} reports", latencies)
    print(f"{'burst':44} {ok} of {reports} reports in {took:.1f} s (cap {max_seconds:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose app is served")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--reports", type=int, default=16)
    parser.add_argument("--quiet-requests", type=int, default=40)
    parser.add_argument("--max-seconds", type=float, default=240.0)
    parser.add_argument("--burst-only", action="store_true", help="skip steps 1 and 2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, service(args.code, Path(folder)) as base:
        print(f"service: {args.code} at {base}")
        with httpx.Client(base_url=base, timeout=600) as client:
            table = many_classes(args.classes, 6)
            for _ in range(2):
                train(client, "many", table, "label")
            train(client, "small", iris(), "species")
            if args.burst_only:
                asyncio.run(burst(base, args.reports, args.max_seconds))
                return
            report, cm = "/v1/models/many/versions/1/report", "/v1/models/many/versions/1/plots"
            big = f"{args.classes}-class"
            print(f"{big + ' report, first':44} {timed_get(client, report):7.3f} s")
            for accept in ("image/png", "image/svg+xml"):
                took = timed_get(client, f"{cm}/confusion_matrix", accept)
                print(f"{big + ' confusion matrix ' + accept:44} {took:7.3f} s")
            print(f"{big + ' report, again':44} {timed_get(client, report):7.3f} s")
            quiet = []
            for i in range(args.quiet_requests):
                name, accept = SMALL_PLOTS[i % 4], FORMATS[(i // 4) % 2]
                quiet.append(timed_get(client, f"/v1/models/small/versions/1/plots/{name}", accept))
        percentiles("small plot, nothing else running", quiet)
        asyncio.run(burst(base, args.reports, args.max_seconds))


if __name__ == "__main__":
    main()
