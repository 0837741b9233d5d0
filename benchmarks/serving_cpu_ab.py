"""Server CPU per request of reference models, measured side by side in one service.

On a machine shared with other work, requests per second measure the machine's load as
much as the service (one make bench round of the XGBoost model gave 130 req/s at 16
clients, the next 1,042). The CPU time the server process spends per request (user +
system, every thread, from /proc) hardly depends on what else runs, so this bench
trains the chosen reference models of ``service_bench.py`` in one service, answers every
workload once (as make bench's check does), then loads each model in turn, rounds
alternating, and prints per model and scenario the median CPU per request with the
spread of the rounds, and req/s for reference.  Linux only (/proc).

    python benchmarks/serving_cpu_ab.py --models bench-xgboost,bench-lightgbm \\
        --scenarios single_16,rows_10000 --rounds 4
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
from pathlib import Path

import httpx
import joblib
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service_bench as sb
from loadgen import LoadGenerator

TICKS = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(c) for c in text]
    return found


def server_pid() -> int:
    """The ``python -m app`` process this one started (with one server process)."""
    todo, seen = [os.getpid()], []
    while todo:
        pid = todo.pop()
        for child in _children(pid):
            seen.append(child)
            todo.append(child)
    for pid in seen:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"-m" in args and b"app" in args:
            return pid
    raise RuntimeError("no server process found")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of the process, every thread."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bench-xgboost,bench-lightgbm")
    parser.add_argument("--scenarios", default="single_1,single_16")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    refs = [next(r for r in sb.REFERENCES if r.model == m) for m in args.models.split(",")]
    scenarios = {s.key: s for s in sb.SCENARIOS}
    chosen = [scenarios[key] for key in args.scenarios.split(",")]
    wrk, how = sb.find_wrk()
    print(f"load generator: {how}", flush=True)
    load = LoadGenerator(wrk)
    data = {ref.dataset: sb.load_dataset(ref.dataset) for ref in refs}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        sb.service(Path(tmp), 1) as base,
        httpx.Client(base_url=base, timeout=120) as client,
    ):
        for name, dataset in data.items():
            dataset.dataset_id = sb.upload(client, name, dataset.frame)
        urls, work = {}, {}
        for ref in refs:
            dataset = data[ref.dataset]
            _, version = sb.train_once(client, ref, dataset.dataset_id)
            path = f"/v1/models/{ref.model}/versions/{version['version']}"
            artifact = client.get(f"{path}/artifact")
            artifact.raise_for_status()
            pipeline = joblib.load(io.BytesIO(artifact.content))
            classifier = ref.task == "classification"
            work[ref.model] = sb.workloads(dataset, classifier, np.random.default_rng(sb.SEED))
            for w in {id(w): w for w in work[ref.model].values()}.values():
                sb.check_answers(client, f"{path}/predict", pipeline, classifier, w)
            urls[ref.model] = f"{base}{path}/predict"
            engine = (version.get("inference") or {}).get("engine")
            print(f"{ref.model}: served by {engine}", flush=True)
        pid = server_pid()
        for _ in range(args.rounds):
            for scenario in chosen:
                for model, url in urls.items():
                    w = work[model][scenario.key]
                    before = cpu_seconds(pid)
                    run = load.run(
                        url + w.query, w.bodies, scenario.clients, args.seconds, w.content_type
                    )
                    used = cpu_seconds(pid) - before
                    per = used / max(run.requests, 1) * 1e6
                    results.setdefault((model, scenario.key), []).append((per, run.rps))
    load.close()
    print("\n| model | request | server CPU us/request (median) | rounds | req/s (median) |")
    print("|---|---|---:|---|---:|")
    for scenario in chosen:
        for model in urls:
            rows = results[(model, scenario.key)]
            cpu = statistics.median(r[0] for r in rows)
            spread = ", ".join(f"{r[0]:.0f}" for r in rows)
            rps = statistics.median(r[1] for r in rows)
            print(f"| {model} | {scenario.label} | {cpu:.0f} | {spread} | {rps:.0f} |")


if __name__ == "__main__":
    main()
