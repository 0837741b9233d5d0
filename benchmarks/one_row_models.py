"""One-row latency and server CPU of two models in one server, in turn, for a loaded host.

Issue 22 asks the 100-round XGBoost's 1-row, 1-client p50 to be no worse than the
100-tree forest's.  ``make bench`` measures each model in a run of its own, seconds apart:
on a host shared with other work its one-client p50s fell in two groups (~0.36-0.55 and
~0.75-0.80 ms) and which model landed in which changed from run to run.  Here one server
(``python -m app`` of ``--tree``, one process, on a data folder of ``tree_cpu_ab.py``)
serves both models, and one client sends one-row JSON requests (``make bench``'s bodies)
over one kept-alive connection per model, the models in turn block by block (``--block``
requests each, the order turning every block), so both see the same host.  Printed per
model: the 10th, 50th and 90th percentile latency of every request, and the server
process's CPU per request (user + system of every thread, from /proc) as the median over
the blocks.  Linux only (/proc).

    PYTHONPATH=. .venv/bin/python benchmarks/one_row_models.py [--data /tmp/tree-cpu-ab]
        [--models bench-xgboost,bench-rf] [--blocks 40] [--block 200]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service_bench as sb
from serving_cpu_ab import cpu_seconds
from tree_cpu_ab import served, trained

HERE = Path(__file__).resolve().parent.parent


def requests_of(model: str, version: int) -> list[bytes]:
    """``make bench``'s one-row JSON requests for ``model``, as raw HTTP/1.1."""
    ref = next(r for r in sb.REFERENCES if r.model == model)
    dataset = sb.load_dataset(ref.dataset)
    work = sb.workloads(dataset, ref.task == "classification", np.random.default_rng(sb.SEED))
    single = work["single_1"]
    path = f"/v1/models/{model}/versions/{version}/predict{single.query}"
    return [
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: {single.content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
        for body in single.bodies
    ]


def answered(connection: socket.socket, request: bytes) -> float:
    """Send one request and read its whole answer: the seconds it took."""
    started = time.perf_counter()
    connection.sendall(request)
    data = b""
    while True:
        data += connection.recv(65536)
        head, found, rest = data.partition(b"\r\n\r\n")
        if found:
            lengths = [h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")]
            if len(rest) >= int(lengths[0].split(b":")[1]):
                break
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.decode("latin-1"))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(HERE))
    parser.add_argument("--data", default="/tmp/tree-cpu-ab", help="kept between runs")
    parser.add_argument("--models", default="bench-xgboost,bench-rf")
    parser.add_argument("--blocks", type=int, default=40, help="blocks per model")
    parser.add_argument("--block", type=int, default=200, help="requests per block")
    args = parser.parse_args()
    tree, folder = Path(args.tree).resolve(), Path(args.data)
    models = args.models.split(",")
    requests = {}
    for model in models:
        ref = next(r for r in sb.REFERENCES if r.model == model)
        version = trained(tree, folder, ref, sb.load_dataset(ref.dataset))
        requests[model] = requests_of(model, version)
    latencies: dict[str, list[float]] = {m: [] for m in models}
    cpu: dict[str, list[float]] = {m: [] for m in models}
    with served(tree, folder / "data", folder / "one_row_models.log") as (base, pid):
        port = int(base.rsplit(":", 1)[1])
        connections = {m: socket.create_connection(("127.0.0.1", port)) for m in models}
        for connection in connections.values():
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for model in models:  # warm-up: loaded, caches filled
            for i in range(args.block):
                answered(connections[model], requests[model][i % len(requests[model])])
        print(f"load average at start {os.getloadavg()}", flush=True)
        for b in range(args.blocks):
            for model in models if b % 2 == 0 else list(reversed(models)):
                batch = requests[model]
                before = cpu_seconds(pid)
                for i in range(args.block):
                    seconds = answered(connections[model], batch[i % len(batch)])
                    latencies[model].append(seconds * 1e3)
                cpu[model].append((cpu_seconds(pid) - before) / args.block * 1e6)
        for connection in connections.values():
            connection.close()
    print(f"load average at end {os.getloadavg()}")
    print(f"\n{args.blocks} blocks of {args.block} one-row requests per model, in turn")
    print("| model | p10 ms | p50 ms | p90 ms | server CPU us/request (median of blocks) |")
    print("|---|---:|---:|---:|---:|")
    for model in models:
        q10, q50, q90 = np.percentile(latencies[model], [10, 50, 90])
        per = statistics.median(cpu[model])
        print(f"| {model} | {q10:.3f} | {q50:.3f} | {q90:.3f} | {per:.0f} |")


if __name__ == "__main__":
    main()
