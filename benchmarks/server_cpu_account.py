"""Where one server process spends its CPU under wrk: one tree's ``python -m app`` on the
data folder ``tree_cpu_ab.py`` trains, one-row requests from ``--clients`` wrk
connections, and py-spy recording the server (``--native``, idle samples off) while
they run.  Prints the server's CPU per request and CPU% (utime + stime from /proc over
the run), each thread's share of the samples, and the functions holding the most samples
(self and inclusive) as microseconds of CPU per request.

    PYTHONPATH=. .venv/bin/python benchmarks/server_cpu_account.py --tree . --seconds 10
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch_turn_ab import _cpu_seconds, _load, server


def _thread_cpu(pid: int) -> dict[str, float]:
    """Each thread's CPU seconds so far, by thread name and id."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[f"{name}:{task.name}"] = (int(fields[11]) + int(fields[12])) / os.sysconf(
            "SC_CLK_TCK"
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/onerow8-ab")
    parser.add_argument("--model", default="bench-rf")
    parser.add_argument("--tree", default=".")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--scenario", default="single_1")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--rate", type=int, default=400, help="py-spy samples a second")
    parser.add_argument("--no-native", action="store_true")
    parser.add_argument("--no-profile", action="store_true", help="CPU figures only")
    parser.add_argument("--focus", action="append", default=[], help="a function's callees")
    parser.add_argument("--keep", help="report this py-spy output again, no run")
    parser.add_argument("--cpu-us", type=float, default=100.0, help="--keep: its CPU/request")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    args = parser.parse_args()
    import service_bench as sb
    from loadgen import LoadGenerator, find_wrk
    from table_bodies_paired import bodies
    from tree_cpu_ab import trained

    data = Path(args.data)
    tree = Path(args.tree).resolve()
    ref = next(r for r in sb.REFERENCES if r.model == args.model)
    dataset = sb.load_dataset(ref.dataset)
    version = trained(tree, data, ref, dataset)
    work = bodies(dataset, ref.task == "classification")  # make bench's, and one-row Parquet
    chosen = work[args.scenario]
    path = f"/v1/models/{args.model}/versions/{version}/predict{chosen.query}"
    wrk, _ = find_wrk(install=False)
    load = LoadGenerator(wrk)
    spy = str(Path(sys.executable).with_name("py-spy"))
    if args.keep:  # a recording again, no run: its CPU per request as printed then
        _report(Path(args.keep), 1, 1e-6 * args.cpu_us, args.top, args.focus)
        return
    extra = dict(item.split("=", 1) for item in args.env)
    with server(tree, data / "data", None, extra) as (base, pid):
        load.run(base + path, chosen.bodies, args.clients, 2, chosen.content_type)
        out = Path(tempfile.mkstemp(prefix="account-", suffix=".txt")[1])
        recorder = None
        if not args.no_profile:
            command = [spy, "record", "--pid", str(pid), "--rate", str(args.rate)]
            command += ["--format", "raw", "--output", str(out), "--threads"]
            # (native stacks need the process paused at each sample)
            command += ["--nonblocking"] if args.no_native else ["--native"]
            command += ["--duration", str(int(args.seconds) + 1)]
            recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(0.5)
        threads_before = _thread_cpu(pid)
        before, wall = _cpu_seconds(pid), time.perf_counter()
        run = load.run(base + path, chosen.bodies, args.clients, args.seconds, chosen.content_type)
        spent, wall = _cpu_seconds(pid) - before, time.perf_counter() - wall
        threads_after = _thread_cpu(pid)
        if recorder is not None and recorder.wait() != 0:
            print(recorder.stderr.read().decode() if recorder.stderr else "py-spy failed")
    load.close()
    per = 1e6 / max(run.requests, 1)
    print(
        f"{args.scenario}, {args.clients} clients, {args.seconds:.0f} s: "
        f"{run.requests / run.seconds:.0f} req/s, p50 {run.latency_ms['p50']:.3f} ms; "
        f"server CPU {spent * per:.0f} us/request, {100 * spent / wall:.0f}% of one core; "
        f"load {_load()}"
    )
    for name, after in sorted(threads_after.items(), key=lambda x: -x[1]):
        used = after - threads_before.get(name, 0.0)
        if used > 0.005:
            print(f"  thread {name}: {used * per:.0f} us/request")
    if recorder is None:
        return
    print(f"py-spy output: {out}")
    _report(out, run.requests, spent, args.top, args.focus)


# Frames of a thread waiting (py-spy's idle test does not see native waits).
_IDLE = ("epoll_pwait", "Condition.wait", "Queue.get", "Event.wait", "sem_timedwait")


def _report(out: Path, requests: int, spent: float, top: int, focus: list[str]) -> None:
    """Busy samples scaled to the CPU measured: each stands for spent / busy samples."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    under: dict[str, collections.Counter[str]] = {f: collections.Counter() for f in focus}
    total = idle = 0
    for line in out.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        if any(mark in frame for frame in frames[-6:] for mark in _IDLE):
            idle += count
            continue
        total += count
        by_thread[frames[0].split(":")[0][:40]] += count
        short = [_short(f) for f in frames[1:]]
        own[short[-1] if short else frames[0]] += count
        for frame in set(short):
            inclusive[frame] += count
        for name in focus:
            for i, frame in enumerate(short):
                if frame.startswith(name + " ") and i + 1 < len(short):
                    under[name][short[i + 1]] += count
                    break
    print(f"{idle} idle samples left out")
    if not total:
        print("no samples")
        return
    scale = spent / total / requests * 1e6  # us of CPU per request for one sample
    print(f"{total} samples; one sample = {scale * requests / 1e6 * 1e3:.3f} ms")
    for name, count in by_thread.most_common():
        print(f"  {name}: {count * scale:.0f} us/request")
    print("self (us/request):")
    for name, count in own.most_common(top):
        print(f"  {count * scale:7.1f}  {name}")
    print("inclusive (us/request):")
    for name, count in inclusive.most_common(top):
        print(f"  {count * scale:7.1f}  {name}")
    for name, callees in under.items():
        print(f"called by {name} (us/request):")
        for callee, count in callees.most_common(top):
            print(f"  {count * scale:7.1f}  {callee}")


def _short(frame: str) -> str:
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for cut in ("site-packages/", "wt-json10/", "/work/main/"):
        if cut in where:
            where = where.split(cut, 1)[1]
    where = where.rsplit(":", 1)[0]
    return f"{name} ({where})"


if __name__ == "__main__":
    main()
