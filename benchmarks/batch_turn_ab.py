"""One-row requests from wrk against two trees of the service, rounds alternating: req/s,
p50 and the server process's CPU per request (its utime + stime over the run, from
/proc) and wrk's, with the host's load average; ``--census`` instead runs each tree once under
``batch_census.py`` and prints how many requests reached the batcher per loop turn and
how many each engine call answered.

Both servers are ``python -m app`` (one server process) on the data folder
``tree_cpu_ab.py`` trains, side by side, each with its tree on ``PYTHONPATH``.

    PYTHONPATH=. .venv/bin/python benchmarks/batch_turn_ab.py \
        --trees base=/work/main,new=. --clients 16 --seconds 2 --rounds 7
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve().parent


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _loop_cpu_seconds(pid: int) -> float:
    """The CPU of the process's main thread (the event loop's), not of its other threads."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def server(
    tree: Path, data: Path, census: Path | None, extra: dict[str, str]
) -> Iterator[tuple[str, int]]:
    import service_bench as sb

    port = sb.free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "ENSEMBLE_DATA_DIR": str(data),
        "ENSEMBLE_WORKERS": "1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        **extra,
    }
    env.pop("ENSEMBLE_API_KEYS", None)
    command = [sys.executable, "-m", "app"]
    if census is not None:
        env["BATCH_CENSUS"] = str(census)
        command = [sys.executable, str(HERE / "batch_census.py")]
    log_path = Path(tempfile.mkstemp(prefix="batch-ab-", suffix=".log")[1])
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=tree, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        sb.until_ready(process, base, log_path)
        yield base, process.pid
    finally:
        sb.stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/onerow8-ab", help="trained once, kept")
    parser.add_argument("--model", default="bench-rf")
    parser.add_argument("--trees", default="base=/work/main,new=.")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--scenario", default="single_1")
    parser.add_argument("--census", action="store_true")
    parser.add_argument("--unbatched", action="store_true", help="ENSEMBLE_BATCH_MAX_WAIT_MS=0")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        help="NAME:KEY=VALUE: an environment variable for one tree's server only",
    )
    parser.add_argument(
        "--scenario-of",
        action="append",
        default=[],
        help="NAME=SCENARIO: this tree's requests (e.g. json=single_1, arrow=single_1_arrow "
        "with --trees json=.,arrow=.: two bodies against one tree, alternating)",
    )
    args = parser.parse_args()
    import numpy as np
    import service_bench as sb
    from loadgen import LoadGenerator, find_wrk
    from tree_cpu_ab import trained

    data = Path(args.data)
    trees = {k: Path(v).resolve() for k, v in (t.split("=", 1) for t in args.trees.split(","))}
    ref = next(r for r in sb.REFERENCES if r.model == args.model)
    dataset = sb.load_dataset(ref.dataset)
    version = trained(next(iter(trees.values())), data, ref, dataset)
    work = sb.workloads(dataset, ref.task == "classification", np.random.default_rng(sb.SEED))
    scenarios = dict.fromkeys(trees, args.scenario)
    scenarios.update(dict(given.split("=", 1) for given in args.scenario_of))
    chosen_of = {name: work[scenario] for name, scenario in scenarios.items()}
    path_of = {
        name: f"/v1/models/{args.model}/versions/{version}/predict{chosen.query}"
        for name, chosen in chosen_of.items()
    }
    chosen, path = chosen_of[next(iter(trees))], path_of[next(iter(trees))]
    wrk, _ = find_wrk(install=False)
    load = LoadGenerator(wrk)
    extra = {"ENSEMBLE_BATCH_MAX_WAIT_MS": "0"} if args.unbatched else {}
    own: dict[str, dict[str, str]] = {name: {} for name in trees}
    for given in args.env:
        name, _, pair = given.partition(":")
        key, _, value = pair.partition("=")
        own[name][key] = value
    if args.census:
        for name, tree in trees.items():
            chosen, path = chosen_of[name], path_of[name]
            out = Path(tempfile.mkstemp(prefix="census-", suffix=".json")[1])
            with server(tree, data / "data", out, {**extra, **own[name]}) as (base, _):
                load.run(base + path, chosen.bodies, args.clients, 1, chosen.content_type)
                run = load.run(
                    base + path, chosen.bodies, args.clients, args.seconds, chosen.content_type
                )
            found = json.loads(out.read_text())
            print(f"{name}: {run.requests / run.seconds:.0f} req/s (census on), load {_load()}")
            for what, counts in found.items():
                total = sum(int(k) * v for k, v in counts.items())
                events = sum(counts.values())
                shown = ", ".join(
                    f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda x: int(x[0]))
                )
                print(f"  {what} (requests: events): {shown}; mean {total / max(events, 1):.2f}")
        load.close()
        return
    with contextlib.ExitStack() as stack:
        bases = {
            name: stack.enter_context(server(t, data / "data", None, {**extra, **own[name]}))
            for name, t in trees.items()
        }
        for name, (base, _) in bases.items():  # warm-up: the model loaded, the caches full
            chosen, path = chosen_of[name], path_of[name]
            load.run(base + path, chosen.bodies, args.clients, 1, chosen.content_type)
        figures: dict[str, dict[str, list[float]]] = {
            name: {"rps": [], "p50": [], "cpu": [], "busy": [], "loop": [], "client": []}
            for name in trees
        }
        loads = []
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                base, pid = bases[name]
                chosen, path = chosen_of[name], path_of[name]
                before, loop_before = _cpu_seconds(pid), _loop_cpu_seconds(pid)
                client_before = _children_cpu_seconds()
                run = load.run(
                    base + path, chosen.bodies, args.clients, args.seconds, chosen.content_type
                )
                spent = _cpu_seconds(pid) - before
                client = _children_cpu_seconds() - client_before  # wrk's (waited for)
                figures[name]["client"].append(client / max(run.requests, 1) * 1e6)
                looped = _loop_cpu_seconds(pid) - loop_before
                figures[name]["loop"].append(looped / max(run.requests, 1) * 1e6)
                figures[name]["rps"].append(run.requests / run.seconds)
                figures[name]["p50"].append(run.latency_ms["p50"])
                figures[name]["cpu"].append(spent / max(run.requests, 1) * 1e6)
                figures[name]["busy"].append(100 * spent / run.seconds)
            loads.append(_load())
            time.sleep(0.2)
    load.close()
    print(
        f"{', '.join(f'{n}: {s}' for n, s in scenarios.items())}, "
        f"{args.clients} client(s), {args.rounds} rounds of {args.seconds} s, "
        f"alternating; load averages after each round: {'; '.join(loads)}"
    )
    for name, f in figures.items():
        rps = ", ".join(f"{v:.0f}" for v in f["rps"])
        print(
            f"{name}: median {statistics.median(f['rps']):.0f} req/s ({rps}); p50 "
            f"{statistics.median(f['p50']):.3f} ms; server CPU "
            f"{statistics.median(f['cpu']):.0f} us/request (event loop's thread "
            f"{statistics.median(f['loop']):.0f}), "
            f"{statistics.median(f['busy']):.0f}% of a core; wrk's CPU "
            f"{statistics.median(f['client']):.0f} us/request"
        )
    if len(trees) == 2:
        a, b = list(trees)
        ratios = [y / x for x, y in zip(figures[a]["rps"], figures[b]["rps"], strict=True)]
        print(
            f"{b}/{a} req/s per round: median {statistics.median(ratios):.2f}x "
            f"({sum(x > 1 for x in ratios)} of {len(ratios)} above 1)"
        )


def _children_cpu_seconds() -> float:
    """The CPU of this process's children waited for (wrk, each run)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
