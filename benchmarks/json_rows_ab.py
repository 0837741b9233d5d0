"""A 10,000-row JSON prediction, two source trees side by side: the same answer, which is faster.

Issue 22's row "10,000 rows no more than 1.5x the library's own ``predict_proba``" on a
machine shared with other work: one timed run measures the machine.  This script starts
the service twice (``python -m app``, one server process each) on one data folder, one
from each source tree (``--old``, default /work/main, and ``--new``, default this one),
trains one reference model of ``service_bench.py`` (default the 100-round XGBoost) through
the first, and then:

1. checks the answers: the two services' response bodies for the same request are the
   same bytes, and their labels and probabilities equal the stored Pipeline's
   ``predict_proba`` called directly, bit for bit;
2. measures in alternating rounds (old, new, the floor; the order turns each round), on
   ``make bench``'s 10,000-row columnar JSON bodies with wrk and one client: each service's
   p50 latency and its server process's CPU per request (user + system of every thread,
   from /proc), and the in-process floor (the Pipeline's ``predict_proba`` on the same
   rows, wall and CPU).

Printed: per round, then the medians of the rounds and the ratios to the floor.  Linux
only (/proc); needs wrk.  ``--interleaved N`` measures instead request by request, old,
new and the floor in turn N times over one kept-alive socket per service (a few
microseconds of client per request): the 10th percentile and the median of each, which
on a loaded machine says more than one wrk run after another.

    .venv/bin/python benchmarks/json_rows_ab.py [--old /work/main] [--new .]
        [--model bench-xgboost] [--rounds 7] [--seconds 2] [--scenario rows_10000]
        [--interleaved 300] [--new-env ENSEMBLE_PREDICT_THREADS=1]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import joblib
import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service_bench as sb
from loadgen import LoadGenerator, find_wrk
from serving_cpu_ab import cpu_seconds

HERE = Path(__file__).resolve().parent.parent


def trained(
    client: httpx.Client, ref: sb.Reference, data: sb.Dataset
) -> tuple[str, dict[str, Any], Any]:
    """Upload ``data`` and train ``ref`` once: (the version's path, the version, its
    fitted pipeline from the artifact)."""
    data.dataset_id = sb.upload(client, ref.dataset, data.frame)
    _, version = sb.train_once(client, ref, data.dataset_id)
    path = f"/v1/models/{ref.model}/versions/{version['version']}"
    artifact = client.get(f"{path}/artifact")
    artifact.raise_for_status()
    return path, version, joblib.load(io.BytesIO(artifact.content))


@contextlib.contextmanager
def tree_service(
    tree: Path,
    folder: Path,
    log_name: str,
    command: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> Iterator[tuple[str, int]]:
    """``python -m app`` (or ``command``) of ``tree`` (its sources first on the path)
    serving ``folder``'s data, with ``extra_env``; yields (base URL, server pid)."""
    port = sb.free_port()
    env = {
        **os.environ,
        "ENSEMBLE_DATA_DIR": str(folder / "data"),
        "ENSEMBLE_WORKERS": "1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "PYTHONPATH": str(tree),
        **(extra_env or {}),
    }
    env.pop("ENSEMBLE_API_KEYS", None)
    log_path = folder / log_name
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command or [sys.executable, "-m", "app"], cwd=tree, env=env, stdout=log, stderr=log
        )
    base = f"http://127.0.0.1:{port}"
    try:
        sb.until_ready(process, base, log_path, timeout_s=90)
        yield base, process.pid
    finally:
        sb.stop(process)


def check(clients: dict[str, httpx.Client], path: str, pipeline: object, work: sb.Workload) -> None:
    """Same bytes from both services; labels and probabilities equal the Pipeline's own."""
    headers = {"Content-Type": work.content_type}
    for frame, body in zip(work.frames, work.bodies, strict=True):
        answers = {}
        for name, client in clients.items():
            url = f"{path}/predict{work.query}"
            response = client.post(url, content=body, headers=headers)
            response.raise_for_status()
            answers[name] = response.content
        if len(set(answers.values())) != 1:
            raise RuntimeError("the two services' response bodies differ")
        answer = orjson.loads(next(iter(answers.values())))
        expected = pipeline.predict_proba(frame)  # type: ignore[attr-defined]
        labels = pipeline.predict(frame).tolist()  # type: ignore[attr-defined]
        got = np.asarray(answer["probabilities"], dtype=np.float64)
        if answer["predictions"] != labels or not np.array_equal(got, expected):
            raise RuntimeError("the answer differs from the Pipeline's predict_proba")
    print(f"answers: the same {len(work.bodies)} response bodies, equal to predict_proba")


def floor(pipeline: object, frames: Sequence[object], seconds: float) -> tuple[float, float]:
    """(median wall ms, median CPU ms) of ``predict_proba`` on the frames in turn."""
    call = pipeline.predict_proba  # type: ignore[attr-defined]
    call(frames[0])
    walls, cpus = [], []
    deadline = time.perf_counter() + seconds
    k = 0
    while time.perf_counter() < deadline or k < 5:
        frame = frames[k % len(frames)]
        k += 1
        w, c = time.perf_counter(), time.process_time()
        call(frame)
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3


class RawClient:
    """One kept-alive HTTP/1.1 connection sending prepared requests (no client library)."""

    def __init__(self, base: str) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = f"{host}:{port}"

    def request(self, path: str, body: bytes, content_type: str) -> bytes:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        return head + body

    def send(self, prepared: bytes) -> bytes:
        """The response body of one prepared request."""
        self.sock.sendall(prepared)
        data = b""
        while b"\r\n\r\n" not in data:
            data += self.sock.recv(1 << 16)
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        chunks, got = [rest], len(rest)
        while got < length:
            chunk = self.sock.recv(1 << 20)
            chunks.append(chunk)
            got += len(chunk)
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.decode(errors="replace"))
        return b"".join(chunks)


def interleaved(
    servers: dict[str, tuple[str, int]],
    path: str,
    work: sb.Workload,
    pipeline: object,
    n: int,
) -> None:
    """Old, new and the floor in turn, ``n`` times: 10th percentile and median of each."""
    clients = {name: RawClient(base) for name, (base, _) in servers.items()}
    url = f"{path}/predict{work.query}"
    prepared = {
        name: [c.request(url, body, work.content_type) for body in work.bodies]
        for name, c in clients.items()
    }
    call = pipeline.predict_proba  # type: ignore[attr-defined]
    times: dict[str, list[float]] = {"old": [], "new": [], "floor": []}
    cpu: dict[str, float] = dict.fromkeys(servers, 0.0)
    for i in range(n):
        k = i % len(work.bodies)
        order = ["old", "new", "floor"] if i % 2 == 0 else ["new", "floor", "old"]
        for name in order:
            if name == "floor":
                started = time.perf_counter()
                call(work.frames[k])
            else:
                before = cpu_seconds(servers[name][1])
                started = time.perf_counter()
                clients[name].send(prepared[name][k])
            times[name].append(time.perf_counter() - started)
            if name != "floor":
                cpu[name] += cpu_seconds(servers[name][1]) - before
    floor_ms = statistics.median(times["floor"]) * 1e3
    print(f"\ninterleaved, {n} requests each (load {os.getloadavg()[0]:.2f}):")
    for name, values in times.items():
        p10, p50 = (float(v) * 1e3 for v in np.percentile(values, [10, 50]))
        extra = f"  server CPU {cpu[name] / n * 1e3:6.2f} ms" if name in cpu else ""
        print(
            f"  {name:5s} p10 {p10:6.2f} ms  p50 {p50:6.2f} ms  {p50 / floor_ms:4.2f}x floor"
            f" p50{extra}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="/work/main")
    parser.add_argument("--new", default=str(HERE))
    parser.add_argument("--model", default="bench-xgboost")
    parser.add_argument("--scenario", default="rows_10000")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--interleaved", type=int, default=0, help="requests each, in turn")
    parser.add_argument(
        "--new-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the new service only (ENSEMBLE_PREDICT_THREADS=1: the old tree "
        "against its own other setting when --new is the same tree)",
    )
    args = parser.parse_args()
    ref = next(r for r in sb.REFERENCES if r.model == args.model)
    scenario = next(s for s in sb.SCENARIOS if s.key == args.scenario)
    wrk, how = find_wrk()
    print(f"load generator: {how}; load average {os.getloadavg()}", flush=True)
    load = LoadGenerator(wrk)
    data = sb.load_dataset(ref.dataset)
    trees = {"old": Path(args.old), "new": Path(args.new)}
    with (
        tempfile.TemporaryDirectory(prefix="json-rows-ab-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        folder = Path(tmp)
        old_base, old_pid = stack.enter_context(tree_service(trees["old"], folder, "old.log"))
        client = stack.enter_context(httpx.Client(base_url=old_base, timeout=120))
        path, version, pipeline = trained(client, ref, data)
        engine = (version.get("inference") or {}).get("engine")
        new_env = dict(item.split("=", 1) for item in args.new_env)
        new_base, new_pid = stack.enter_context(
            tree_service(trees["new"], folder, "new.log", extra_env=new_env)
        )
        new_client = stack.enter_context(httpx.Client(base_url=new_base, timeout=120))
        work = sb.workloads(data, True, np.random.default_rng(sb.SEED))[scenario.key]
        check({"old": client, "new": new_client}, path, pipeline, work)
        servers = {"old": (old_base, old_pid), "new": (new_base, new_pid)}
        print(f"{ref.model} v{version['version']}, compiled engine {engine}", flush=True)
        for base, _ in servers.values():  # warm: the model loaded in each
            load.run(f"{base}{path}/predict{work.query}", work.bodies, 1, 1, work.content_type)
        if args.interleaved:
            interleaved(servers, path, work, pipeline, args.interleaved)
            load.close()
            return
        rows: dict[str, list[tuple[float, float]]] = {"old": [], "new": [], "floor": []}
        for r in range(args.rounds):
            order = ["old", "new", "floor"] if r % 2 == 0 else ["floor", "new", "old"]
            for name in order:
                if name == "floor":
                    rows[name].append(floor(pipeline, work.frames, args.seconds))
                    continue
                base, pid = servers[name]
                before = cpu_seconds(pid)
                url = f"{base}{path}/predict{work.query}"
                run = load.run(url, work.bodies, 1, args.seconds, work.content_type)
                per = (cpu_seconds(pid) - before) / max(run.requests, 1) * 1e3
                rows[name].append((run.latency_ms["p50"], per))
            line = ", ".join(f"{n} {v[-1][0]:.2f} ms ({v[-1][1]:.2f} CPU)" for n, v in rows.items())
            print(f"round {r + 1}: {line}; load {os.getloadavg()[0]:.2f}", flush=True)
    load.close()
    floor_ms = statistics.median(w for w, _ in rows["floor"])
    print(f"\nmedians of {args.rounds} rounds ({scenario.label}, {ref.model}):")
    for name, values in rows.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(f"  {name:5s} p50 {wall:6.2f} ms  {wall / floor_ms:4.2f}x floor  CPU {cpu:6.2f} ms")


if __name__ == "__main__":
    main()
