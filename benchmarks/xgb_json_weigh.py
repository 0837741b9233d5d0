"""Weighs two ideas for issue 22's 10,000-row XGBoost JSON row, in process, before any is built.

The served request reads the body's numbers (simdjson, holding the GIL), checks them, then
predicts in parts on ``ENSEMBLE_PREDICT_THREADS`` threads (XGBoost's predictor releases
the GIL).  Printed, each a median of alternating rounds of the calling thread's CPU time
(``time.thread_time``) or of the process's (``time.process_time``, every thread):

1. the reader's stages (:mod:`app.json_numbers`): simdjson's parse, the rows' lengths, the
   bracket count, the copy into one buffer, the exactness check, and the whole reader;
2. XGBoost's own cost per ``predict_proba`` call: one row, and 10,000 rows in 1, 2, 5 and
   10 calls (what a row more or a part more costs), and cast to float32 first (XGBoost
   compares float32 features: the same bits, half the bytes to read);
3. pipelining against today's order: "today" reads the whole body then predicts in one
   call of XGBoost on two threads, as a server process answers it
   (:mod:`ensembles.inference.library_threads`, ``ENSEMBLE_PREDICT_THREADS=2``);
   "pipelined" cuts the body's rows into ``--chunks`` pieces at row boundaries, parses
   each with simdjson and hands all but the last to one pool thread to predict (one
   XGBoost thread, as stored) while the next is parsed, the calling thread predicting the
   last.  simdjson holds the GIL while it parses, and a thread waiting for the GIL waits
   up to the switch interval (5 ms): so each hand-off waits until the pool thread has
   started its call (it then gives the GIL up inside XGBoost).  Every answer is checked
   equal to the Pipeline's ``predict_proba`` on the same rows, bit for bit.  The
   pipelined reader is a sketch for ``make bench``'s bodies only (columns, then data,
   then options): it checks nothing a served reader must.

The model is the stored Pipeline of ``service_bench.py``'s ``bench-xgboost`` in a data
folder of ``tree_cpu_ab.py`` (``--data``; trained there first if it is not).

    PYTHONPATH=. .venv/bin/python benchmarks/xgb_json_weigh.py [--data /tmp/tree-cpu-ab]
        [--rounds 10] [--chunks 4]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the service (app/__init__.py)

import argparse
import itertools
import statistics
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import simdjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service_bench as sb
from tree_cpu_ab import trained

from app import json_numbers
from ensembles.inference.library_threads import threaded_twin
from ensembles.inference.rows import exact_floats

MODEL = "bench-xgboost"
Clock = Callable[[], float]


def medians(
    cases: Mapping[str, Callable[[], object]], rounds: int, calls: int, clock: Clock
) -> dict[str, float]:
    """Median over ``rounds`` (the order turning each round) of each case's median ms."""
    found: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(rounds):
        order = list(cases.items())
        if r % 2:
            order.reverse()
        for name, case in order:
            times = []
            for _ in range(calls):
                started = clock()
                case()
                times.append(clock() - started)
            found[name].append(statistics.median(times) * 1e3)
    return {name: statistics.median(values) for name, values in found.items()}


def reader_stages(body: bytes) -> dict[str, Callable[[], object]]:
    parser = simdjson.Parser()
    data: Any = parser.parse(body)["instances"]["data"]  # type: ignore[index]
    flat = np.frombuffer(data.as_buffer(of_type="d"), dtype=np.float64)
    return {
        "whole reader": lambda: json_numbers.read_numeric_columnar(body),
        "simdjson parse (new parser)": lambda: simdjson.Parser().parse(body),
        "rows' lengths": lambda: set(map(len, data)),
        "bracket count": lambda: json_numbers._brackets(body),
        "copy into one buffer": lambda: data.as_buffer(of_type="d"),
        "exactness": lambda: exact_floats(flat),
    }


def xgboost_calls(estimator: Any, rows: np.ndarray[Any, Any]) -> dict[str, Callable[[], object]]:
    cases: dict[str, Callable[[], object]] = {
        "1 row, 1 call": lambda: estimator.predict_proba(rows[:1])
    }
    for calls in (1, 2, 5, 10):
        cases[f"10,000 rows in {calls} calls"] = _in_calls(estimator, np.array_split(rows, calls))
    # XGBoost walks float32 features: the cast made before the call, same bits (checked).
    if not same_bits(
        estimator.predict_proba(rows.astype(np.float32)), estimator.predict_proba(rows)
    ):
        raise RuntimeError("float32 rows do not give float64 rows' probabilities")
    cases["10,000 rows cast to float32"] = lambda: estimator.predict_proba(rows.astype(np.float32))
    return cases


def _in_calls(estimator: Any, parts: list[np.ndarray[Any, Any]]) -> Callable[[], object]:
    return lambda: [estimator.predict_proba(p) for p in parts]


def row_cuts(body: bytes, chunks: int) -> list[int]:
    """Byte offsets cutting the rows of a ``make bench`` body into ``chunks`` pieces (the
    last offset is the data's closing bracket)."""
    starts = np.flatnonzero(np.frombuffer(body, dtype=np.uint8) == ord("["))[2:]
    picked = np.linspace(0, starts.size, chunks + 1).astype(np.intp)[:-1]
    return [int(starts[i]) for i in picked] + [body.rindex(b"]]") + 1]


def pipelined(
    body: bytes, estimator: Any, pool: ThreadPoolExecutor, chunks: int, n_columns: int
) -> np.ndarray[Any, Any]:
    futures = []
    cuts = row_cuts(body, chunks)
    last: np.ndarray[Any, Any] | None = None
    for i, (start, end) in enumerate(itertools.pairwise(cuts)):
        piece = body[start:end].rstrip()
        piece = piece.removesuffix(b",")
        parsed: Any = simdjson.Parser().parse(b"[" + piece + b"]")
        matrix = np.frombuffer(parsed.as_buffer(of_type="d"), dtype=np.float64)
        rows = matrix.reshape(-1, n_columns)
        if i == chunks - 1:
            last = rows
            break
        started = threading.Event()
        futures.append(pool.submit(_started_call, started, estimator.predict_proba, rows))
        started.wait()  # the GIL handed over: the pool thread's call starts now
    assert last is not None
    mine = estimator.predict_proba(last)
    return np.concatenate([*(f.result() for f in futures), mine])


def _started_call(started: threading.Event, call: Callable[..., Any], rows: Any) -> Any:
    started.set()
    return call(rows)


def today(body: bytes, twin: Any) -> np.ndarray[Any, Any]:
    """As served: the whole body read, then one call of XGBoost on two threads."""
    numbers = json_numbers.read_numeric_columnar(body)
    assert numbers is not None
    return np.asarray(twin.predict_proba(numbers.data))


def same_bits(a: Any, b: Any) -> bool:
    left = np.ascontiguousarray(a, dtype=np.float64)
    right = np.ascontiguousarray(b, dtype=np.float64)
    return left.shape == right.shape and bool(
        np.array_equal(left.view(np.int64), right.view(np.int64))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/tree-cpu-ab")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=4)
    args = parser.parse_args()
    ref = next(r for r in sb.REFERENCES if r.model == MODEL)
    dataset = sb.load_dataset(ref.dataset)
    folder = Path(args.data)
    version = trained(Path(__file__).resolve().parent.parent, folder, ref, dataset)
    artifact = next((folder / "data" / "artifacts").glob(f"{MODEL}--*/{version}.joblib"))
    pipeline = joblib.load(artifact)
    estimator = pipeline[-1]
    work = sb.workloads(dataset, True, np.random.default_rng(sb.SEED))["rows_10000"]
    body, frame = work.bodies[0], work.frames[0]
    rows = np.asarray(pipeline[:-1].transform(frame), dtype=np.float64)
    print(f"{MODEL} ({artifact}), n_jobs {estimator.n_jobs}; body {len(body):,} bytes")
    print(f"load average at start {os.getloadavg()}")

    print("\n1. the reader's stages, thread CPU ms")
    for name, ms in medians(reader_stages(body), args.rounds, 10, time.thread_time).items():
        print(f"  {name:30s} {ms:7.3f}")

    print("\n2. XGBoost's predict_proba, thread CPU ms")
    cases = xgboost_calls(estimator, rows)
    for name, ms in medians(cases, args.rounds, 5, time.thread_time).items():
        print(f"  {name:30s} {ms:7.3f}")

    expected = pipeline.predict_proba(frame)
    twin = threaded_twin(estimator, 2)
    with ThreadPoolExecutor(1) as pool:
        orders: dict[str, Callable[[], object]] = {
            "today": lambda: today(body, twin),
            f"pipelined, {args.chunks} chunks": lambda: pipelined(
                body, estimator, pool, args.chunks, rows.shape[1]
            ),
        }
        for name, order in orders.items():
            if not same_bits(order(), expected):
                raise RuntimeError(f"{name}: not predict_proba's bits")
        print("\n3. read + predict, both equal to predict_proba bit for bit")
        walls = medians(orders, args.rounds, 8, time.perf_counter)
        cpus = medians(orders, args.rounds, 8, time.process_time)
        for name in orders:
            print(f"  {name:30s} wall {walls[name]:7.2f} ms  process CPU {cpus[name]:7.2f} ms")
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
