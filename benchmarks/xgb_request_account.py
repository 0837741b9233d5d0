"""One 10,000-row XGBoost request accounted end to end, thread by thread, beside its floor.

Issue 22 asks ``make bench``'s 10,000-row columnar JSON request of the 100-round XGBoost
classifier to take no more than 1.5x the library's in-process ``predict_proba`` (the
floor: the stored Pipeline's ``predict_proba`` on a DataFrame, in the bench process).
This script asks one server process of ``--tree`` (``python -m app``, one worker) for the
same rows in turn, request by request over one kept-alive socket
(``json_rows_ab.RawClient``), in alternating order each round:

* ``json``: the columnar JSON body ``make bench`` sends; ``arrow``: the same rows as an
  Arrow IPC stream (options in the query string); their answers are checked to be the
  same bytes first;
* ``floor``: the stored Pipeline's ``predict_proba`` on the DataFrame in this process,
  and its two halves: ``floor: preprocessing`` (``pipeline[:-1].transform``, which gives
  a Fortran-ordered float64 matrix) and ``floor: XGBoost`` (the estimator's
  ``predict_proba`` on that matrix, one thread as stored); ``XGBoost, C order`` is the
  same call on the C-ordered copy the service's engine is given.

Printed per way: p10 and p50 wall time (and the ratio of the p50 to the floor's) and,
for the requests, the server's CPU per request split by thread from ``/proc`` (the event
loop; the worker threads that read, check, predict and write; XGBoost's OpenMP threads,
the engine's second thread; anything else), the threads named by ``py-spy dump`` once
(a thread it does not list is native: OpenMP, jemalloc, libuv).  Wall times move with
the host's load (printed); the CPU split moves less.  Linux only (/proc).

    PYTHONPATH=. .venv/bin/python benchmarks/xgb_request_account.py [--tree .]
        [--requests 200] [--py-spy .venv/bin/py-spy]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the service (app/__init__.py)

import argparse
import contextlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service_bench as sb
from json_arrow_gap import both_ways
from json_rows_ab import trained, tree_service

HERE = Path(__file__).resolve().parent.parent
MODEL = "bench-xgboost"
REQUESTS = ("json", "arrow")
CALLS = ("floor", "floor: preprocessing", "floor: XGBoost", "XGBoost, C order")
_TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of ``pid``."""
    found: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            found[int(tid)] = (int(fields[11]) + int(fields[12])) / _TICK
    return found


def python_threads(pid: int, py_spy: str | None) -> dict[int, str]:
    """Native thread id -> Python thread name, from ``py-spy dump`` (empty without it)."""
    if py_spy is None:
        return {}
    command = [py_spy, "dump", "-p", str(pid)]
    dump = subprocess.run(command, check=False, capture_output=True, text=True)
    found = re.findall(r'Thread (\d+) \(\w+\): "([^"]+)"', dump.stdout)
    return {int(tid): name for tid, name in found}


def role(tid: int, pid: int, names: dict[int, str]) -> str:
    if tid == pid:
        return "event loop"
    name = names.get(tid)
    if name is None:
        return "native (OpenMP: the engine's 2nd thread)" if names else "other"
    return "worker threads (read, check, predict, write)" if "AnyIO" in name else name


def account(args: argparse.Namespace) -> None:
    ref = next(r for r in sb.REFERENCES if r.model == MODEL)
    data = sb.load_dataset(ref.dataset)
    with (
        tempfile.TemporaryDirectory(prefix="xgb-account-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        base, pid = stack.enter_context(tree_service(Path(args.tree), Path(tmp), "server.log"))
        client = stack.enter_context(httpx.Client(base_url=base, timeout=120))
        path, _, pipeline = trained(client, ref, data)
        raw, prepared, frames = both_ways(base, path, ref, data)
        head, estimator = pipeline[:-1], pipeline[-1]
        matrices = [head.transform(f) for f in frames]
        c_order = [np.ascontiguousarray(m) for m in matrices]
        calls: dict[str, Callable[[int], Any]] = {
            "floor": lambda k: pipeline.predict_proba(frames[k]),
            "floor: preprocessing": lambda k: head.transform(frames[k]),
            "floor: XGBoost": lambda k: estimator.predict_proba(matrices[k]),
            "XGBoost, C order": lambda k: estimator.predict_proba(c_order[k]),
        }
        for k in range(len(frames)):  # warm, and the halves are the whole's bits
            whole = calls["floor"](k)
            if not np.array_equal(whole, calls["floor: XGBoost"](k)):
                raise RuntimeError("the floor's halves are not the floor")
            if not np.array_equal(whole, calls["XGBoost, C order"](k)):
                raise RuntimeError("XGBoost on a C-ordered matrix is not the floor")
        names = python_threads(pid, args.py_spy)
        ways = (*REQUESTS, *CALLS)
        walls: dict[str, list[float]] = {way: [] for way in ways}
        cpu: dict[str, dict[str, float]] = {way: {} for way in REQUESTS}
        for i in range(args.requests):
            k = i % len(frames)
            for way in ways if i % 2 == 0 else ways[::-1]:
                before = thread_cpu(pid) if way in REQUESTS else {}
                started = time.perf_counter()
                if way in REQUESTS:
                    raw.send(prepared[way][k])
                else:
                    calls[way](k)
                walls[way].append(time.perf_counter() - started)
                if way in REQUESTS:
                    for tid, seconds in thread_cpu(pid).items():
                        used = seconds - before.get(tid, 0.0)
                        if used:
                            key = role(tid, pid, names)
                            cpu[way][key] = cpu[way].get(key, 0.0) + used
    floor = statistics.median(walls["floor"])
    n = args.requests
    print(f"\n{MODEL}, 10,000 rows: {n} of each in turn; load average {os.getloadavg()}")
    print("| way | p10 ms | p50 ms | p50 / floor |\n|---|---:|---:|---:|")
    for way in ways:
        p10, p50 = (float(v) for v in np.percentile(walls[way], [10, 50]))
        print(f"| {way} | {p10 * 1e3:.2f} | {p50 * 1e3:.2f} | {p50 / floor:.2f}x |")
    print("\nserver CPU per request, ms, by thread:")
    roles = sorted({r for way in REQUESTS for r in cpu[way]})
    print("| thread | " + " | ".join(REQUESTS) + " |\n|---|" + "---:|" * len(REQUESTS))
    for r in roles:
        cells = " | ".join(f"{cpu[w].get(r, 0.0) / n * 1e3:.2f}" for w in REQUESTS)
        print(f"| {r} | {cells} |")
    totals = " | ".join(f"{sum(cpu[w].values()) / n * 1e3:.2f}" for w in REQUESTS)
    print(f"| all | {totals} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(HERE))
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or _venv_py_spy())
    account(parser.parse_args())


def _venv_py_spy() -> str | None:
    found = Path(sys.executable).with_name("py-spy")
    return str(found) if found.exists() else None


if __name__ == "__main__":
    main()
