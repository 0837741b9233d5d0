"""One row as JSON, Arrow and Parquet, at 1 and 16 clients, in paired rounds (issue 24.1).

Issue 24.1 asks a table body at 16 clients to serve at least what it serves from one
client, and at least what JSON serves for one row.  On this shared 2-core machine two runs
of the same request minutes apart differ by more than the bodies do (the same ``make
bench`` run gave Arrow 0.93x JSON in its main table and 1.03x in its batching block), so
here the requests to compare run in turns, round after round (their order reversed every
other round), against server processes started together (``python -m app`` of each
``--trees`` tree on the data folder ``tree_cpu_ab.py`` trains), and each run is divided by
the first combination's run of the same round.  Printed per combination: the median
req/s, the server's CPU per request (user + system, /proc), the p50, and the ratio to the
first combination (median, spread, how many rounds at least 1x).

Bodies are ``make bench``'s one-row bodies of the 100-tree forest (``service_bench
.workloads``): ``single_16`` (JSON), ``single_16_arrow`` (an Arrow IPC stream written
from pandas, 7.7 kB, 4.2 kB of it pandas' metadata), and two made here: ``arrow_bare``
(the same rows without the schema's metadata, 3.6 kB) and ``parquet`` (the rows written
by pandas' ``to_parquet``, 19 kB).  A combination is ``tree:body[:clients]`` (16 clients
unless given).  Linux only (/proc).

    PYTHONPATH=. .venv/bin/python benchmarks/table_bodies_paired.py --trees head=. \\
        --combos head:single_16,head:single_16_arrow,head:parquet:1,head:parquet --rounds 12
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service_bench as sb
from loadgen import LoadGenerator, find_wrk
from serving_cpu_ab import cpu_seconds
from tree_cpu_ab import served, trained

PARQUET = "application/vnd.apache.parquet"


def _parquet(frame: pd.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.to_parquet(out, index=False)
    return out.getvalue()


def bodies(data: sb.Dataset, classifier: bool = True) -> dict[str, sb.Workload]:
    """``make bench``'s workloads, with the one-row Arrow rows without metadata and as
    Parquet files."""
    work = sb.workloads(data, classifier, np.random.default_rng(sb.SEED))
    arrow = work["single_16_arrow"]
    work["arrow_bare"] = sb.Workload(
        arrow.frames,
        [sb.arrow_body(f, metadata=False) for f in arrow.frames],
        arrow.content_type,
        arrow.query,
    )
    work["parquet"] = sb.Workload(
        arrow.frames, [_parquet(f) for f in arrow.frames], PARQUET, arrow.query
    )
    return work


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default="head=.", help="name=path,...")
    parser.add_argument("--combos", required=True, help="tree:body[:clients],...")
    parser.add_argument("--data", default="/tmp/tree-cpu-ab", help="kept between runs")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    trees = {n: Path(p).resolve() for n, p in (t.split("=", 1) for t in args.trees.split(","))}
    combos = [tuple(c.split(":")) for c in args.combos.split(",")]
    folder = Path(args.data)
    ref = next(r for r in sb.REFERENCES if r.model == "bench-rf")
    dataset = sb.load_dataset(ref.dataset)
    version = trained(next(iter(trees.values())), folder, ref, dataset)
    work = bodies(dataset)
    wrk, how = find_wrk()
    print(f"load generator: {how}", flush=True)
    load = LoadGenerator(wrk)
    path = f"/v1/models/{ref.model}/versions/{version}/predict"
    runs: dict[tuple[str, ...], list[tuple[float, float, float]]] = {c: [] for c in combos}
    with contextlib.ExitStack() as stack:
        servers = {
            name: stack.enter_context(served(tree, folder / "data", folder / f"{name}.log"))
            for name, tree in trees.items()
        }
        for combo in combos:  # warm: the model loaded, the bodies' layouts learnt
            w = work[combo[1]]
            load.run(f"{servers[combo[0]][0]}{path}{w.query}", w.bodies, 16, 0.5, w.content_type)
        for turn in range(args.rounds):
            for combo in combos if turn % 2 == 0 else combos[::-1]:
                base, pid = servers[combo[0]]
                w = work[combo[1]]
                clients = int(combo[2]) if len(combo) > 2 else 16
                before = cpu_seconds(pid)
                url = f"{base}{path}{w.query}"
                run = load.run(url, w.bodies, clients, args.seconds, w.content_type)
                if run.errors:
                    raise RuntimeError(f"{':'.join(combo)}: {run.errors} failed requests")
                cpu = (cpu_seconds(pid) - before) / max(run.requests, 1) * 1e6
                runs[combo].append((run.rps, cpu, run.latency_ms["p50"]))
    load.close()
    first = runs[combos[0]]
    print(f"\n{ref.label}, {args.rounds} rounds of {args.seconds:g} s in turns")
    print("| tree:body:clients | req/s | server CPU us/request | p50 ms ", end="")
    print("| / first | spread | >= 1x |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for combo, rows in runs.items():
        ratios = [mine[0] / theirs[0] for mine, theirs in zip(rows, first, strict=True)]
        print(
            f"| {':'.join(combo)} | {statistics.median(r[0] for r in rows):.0f} "
            f"| {statistics.median(r[1] for r in rows):.0f} "
            f"| {statistics.median(r[2] for r in rows):.2f} | {statistics.median(ratios):.3f}x "
            f"| {min(ratios):.3f}-{max(ratios):.3f} | {sum(r >= 1 for r in ratios)}/{len(rows)} |"
        )


if __name__ == "__main__":
    main()
