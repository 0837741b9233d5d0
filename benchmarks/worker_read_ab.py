"""A training job's reads outside the fit, as its worker makes them, old tree against new.

For each tree (``--tree``, the first is A, the second B), a process of that tree imports
what the training fork server preloads (``app.jobs.worker``), opens a registry holding
``train_scale``'s 200,000 x 20 table stored as an upload stores it, and forks one child
per round; the child times ``ensembles.jobs.load_training_data`` (the worker's read: the
verified bytes, the Parquet decode, the canonical frame, the labels and the model frame)
and ``ensembles.jobs.load_labels`` (the submit's check of the labels), wall and the
process's CPU, as a fresh job's process would.  The trees alternate round by round:

    .venv/bin/python benchmarks/worker_read_ab.py --tree /old/tree --tree . --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[3])
import app.jobs.worker  # the fork server's preload
from ensembles.data import read_table, table_to_parquet
from ensembles.jobs import load_labels, load_training_data
from ensembles.registry import open_registry
from train_scale import parquet, table

registry = open_registry(sys.argv[1])
found = [d for d in registry.list_datasets() if d.name == "scale"]
if not found:
    stored = read_table(parquet(table(200_000, 20)), filename="t.parquet")
    found = [registry.create_dataset(
        name="scale", parquet=table_to_parquet(stored), n_rows=stored.n_rows,
        columns=[c.as_dict() for c in stored.columns])]
dataset_id = found[0].id
for _ in range(int(sys.argv[2])):
    out, into = os.pipe()
    pid = os.fork()
    if pid == 0:
        times = {}
        for what, call in (("load_labels", load_labels),
                           ("load_training_data", load_training_data)):
            c, w = time.process_time(), time.perf_counter()
            call(registry, dataset_id, "target", None, "classification")
            times[what] = (time.perf_counter() - w, time.process_time() - c)
        os.write(into, json.dumps(times).encode())
        os._exit(0)
    os.close(into)
    print(os.read(out, 10_000).decode(), flush=True)
    os.waitpid(pid, 0)
"""


def one_round(tree: Path, data: Path, forks: int) -> list[dict[str, list[float]]]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_WAIT_POLICY": "PASSIVE"}
    bench = str(Path(__file__).resolve().parent)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(data), str(forks), bench],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--forks", type=int, default=2, help="children per round and tree")
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in args.tree]
    results: dict[str, dict[str, list[tuple[float, float]]]] = {str(t): {} for t in trees}
    with tempfile.TemporaryDirectory(prefix="ensemble-read-ab-") as tmp:
        for r in range(args.rounds):
            for i, tree in enumerate(trees):
                for times in one_round(tree, Path(tmp) / f"data{i}", args.forks):
                    for what, pair in times.items():
                        results[str(tree)].setdefault(what, []).append((pair[0], pair[1]))
            print(f"round {r + 1} done, load {os.getloadavg()[0]:.1f}", flush=True)
    for name, stages in results.items():
        print(name)
        for what, pairs in stages.items():
            walls, cpus = [p[0] for p in pairs], [p[1] for p in pairs]
            print(
                f"  {what:20s} n={len(pairs):2d} median wall {statistics.median(walls):.3f} s"
                f"  median cpu {statistics.median(cpus):.3f} s  (min cpu {min(cpus):.3f})"
            )


if __name__ == "__main__":
    main()
