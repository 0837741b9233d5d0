"""Server CPU per request of two (or more) source trees, one model, rounds alternating.

``serving_cpu_ab.py`` compares models in one service; this compares code: each tree (a
git worktree, or ``git archive <commit> | tar -x -C <dir>``) serves the same data folder
in a server process of its own (``python -m app`` run from the tree), and every
scenario is run against each in turn, round after round, with the server's user +
system CPU (from /proc) divided by the requests answered.  On a shared machine the
req/s of one run says more about the neighbours than about the code; CPU per request
alternated over rounds hardly does.  The first tree trains the model once into
``--data`` (kept for later runs); every tree must give the same bytes for the same
body before anything is timed.  Linux only (/proc).

    python benchmarks/tree_cpu_ab.py --trees base=/tmp/base,new=. --rounds 6
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service_bench as sb
from loadgen import LoadGenerator
from serving_cpu_ab import cpu_seconds

ONE_ROW = "single_1,single_16,single_1_arrow,single_16_arrow"


@contextlib.contextmanager
def served(tree: Path, data: Path, log: Path) -> Iterator[tuple[str, int]]:
    """``python -m app`` of ``tree`` (one server process) on ``data``: (base URL, pid)."""
    port = sb.free_port()
    env = {
        **os.environ,
        "ENSEMBLE_DATA_DIR": str(data),
        "ENSEMBLE_WORKERS": "1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "PYTHONPATH": str(tree),
    }
    env.pop("ENSEMBLE_API_KEYS", None)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], cwd=tree, env=env, stdout=out, stderr=out
        )
    base = f"http://127.0.0.1:{port}"
    try:
        sb.until_ready(process, base, log)
        yield base, process.pid
    finally:
        sb.stop(process)


def trained(tree: Path, folder: Path, ref: sb.Reference, dataset: sb.Dataset) -> int:
    """The version of ``ref`` in ``folder`` (trained by ``tree``'s service if new)."""
    kept = folder / f"{ref.model}.json"
    if not kept.exists():
        folder.mkdir(parents=True, exist_ok=True)
        with (
            served(tree, folder / "data", folder / "train.log") as (base, _),
            httpx.Client(base_url=base, timeout=120) as client,
        ):
            dataset_id = sb.upload(client, ref.dataset, dataset.frame)
            _, version = sb.train_once(client, ref, dataset_id)
            kept.write_text(json.dumps({"version": version["version"]}))
    return int(json.loads(kept.read_text())["version"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", required=True, help="name=path,name=path")
    parser.add_argument("--data", default="/tmp/tree-cpu-ab", help="kept between runs")
    parser.add_argument("--model", default="bench-rf")
    parser.add_argument("--scenarios", default=ONE_ROW)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    trees = {n: Path(p).resolve() for n, p in (t.split("=", 1) for t in args.trees.split(","))}
    folder = Path(args.data)
    ref = next(r for r in sb.REFERENCES if r.model == args.model)
    dataset = sb.load_dataset(ref.dataset)
    version = trained(next(iter(trees.values())), folder, ref, dataset)
    classifier = ref.task == "classification"
    work = sb.workloads(dataset, classifier, np.random.default_rng(sb.SEED))
    chosen = [s for s in sb.SCENARIOS if s.key in args.scenarios.split(",")]
    wrk, how = sb.find_wrk()
    print(f"load generator: {how}", flush=True)
    load = LoadGenerator(wrk)
    path = f"/v1/models/{ref.model}/versions/{version}/predict"
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with contextlib.ExitStack() as stack:
        servers = {
            name: stack.enter_context(served(tree, folder / "data", folder / f"{name}.log"))
            for name, tree in trees.items()
        }
        for scenario in chosen:  # the same bytes from every tree, before any timing
            w = work[scenario.key]
            for body in w.bodies:
                answers = {
                    httpx.post(
                        f"{base}{path}{w.query}",
                        content=body,
                        headers={"content-type": w.content_type},
                    ).content
                    for base, _ in servers.values()
                }
                if len(answers) != 1:
                    raise RuntimeError(f"the trees answer {scenario.key} differently")
        for _ in range(args.rounds):
            for scenario in chosen:
                w = work[scenario.key]
                for name, (base, pid) in servers.items():
                    before = cpu_seconds(pid)
                    run = load.run(
                        f"{base}{path}{w.query}",
                        w.bodies,
                        scenario.clients,
                        args.seconds,
                        w.content_type,
                    )
                    per = (cpu_seconds(pid) - before) / max(run.requests, 1) * 1e6
                    row = (per, run.rps, run.latency_ms["p50"])
                    results.setdefault((scenario.key, name), []).append(row)
    load.close()
    print(f"\n{ref.label}, {args.rounds} rounds of {args.seconds:g} s, trees alternating")
    print("| request | tree | server CPU us/request (median) | rounds | req/s | p50 ms |")
    print("|---|---|---:|---|---:|---:|")
    for scenario in chosen:
        for name in trees:
            rows = results[(scenario.key, name)]
            cpu = statistics.median(r[0] for r in rows)
            spread = ", ".join(f"{r[0]:.0f}" for r in rows)
            rps = statistics.median(r[1] for r in rows)
            p50 = statistics.median(r[2] for r in rows)
            print(f"| {scenario.label} | {name} | {cpu:.0f} | {spread} | {rps:.0f} | {p50:.2f} |")


if __name__ == "__main__":
    main()
