"""Weighs, in process, the engines and the Arrow check of a 10,000-row request (issues 22
and 24): which engine should answer XGBoost's and gradient boosting's big requests, with
how many threads, and what a large Arrow table's check and stacking cost.

Printed, each a median over alternating rounds (the order turning each round) of the
calling thread's CPU (``time.thread_time``), the process's CPU (every thread,
``time.process_time``) and wall time, with the load average (other processes share the
host: the thread CPU is the figure to compare):

1. XGBoost at 10,000 rows: the compiled engine (treelite's GTIL, as the servable would
   build it), the library's ``predict_proba`` in one call (one thread, as stored), in two
   parts on two threads (what the service does: ``RowParts``), and the booster's
   ``inplace_predict`` with two threads in one call (a copy of the booster), and the
   service's way now: ``predict_proba`` of the estimator's two-thread twin
   (:mod:`ensembles.inference.library_threads`).  Every answer
   is checked equal to ``predict_proba``'s bits first.
2. Gradient boosting at 10,000 rows: ``predict_proba`` (scikit-learn's ``predict_stages``,
   holding the GIL), the walk outside the GIL (``boosted_sum.boosted_raw``) in one call
   and in two parts on two threads.
3. A 10,000-row Arrow table of 30 float64 columns: ``check_table`` and the model's matrix
   (``stack_columns``), column by column (``LARGE_ROWS`` 0, as before) and as one matrix.

The models are the stored Pipelines of ``service_bench.py``'s ``bench-xgboost`` and
``bench-gb`` in a data folder of ``tree_cpu_ab.py`` (``--data``; trained there first if
they are not).  OpenMP's threads wait passively, as in the service.

    PYTHONPATH=. .venv/bin/python benchmarks/big_engines_weigh.py [--data /tmp/tree-cpu-ab]
        [--rounds 9]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the service sets it (app/__init__.py)

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service_bench as sb
from tree_cpu_ab import trained

from ensembles.builders import FeatureColumn
from ensembles.inference import check_table, small_tables
from ensembles.inference.boosted_sum import boosted_raw
from ensembles.inference.compiled import restore_model
from ensembles.inference.library_threads import threaded_twin
from ensembles.inference.servable import stack_columns
from ensembles.signature import ModelSignature

CLOCKS: dict[str, Callable[[], float]] = {
    "thread CPU": time.thread_time,
    "process CPU": time.process_time,
    "wall": time.perf_counter,
}


def medians(cases: Mapping[str, Callable[[], object]], rounds: int, calls: int) -> None:
    """Prints each case's median over rounds of its median per call, for every clock."""
    found: dict[str, dict[str, list[float]]] = {n: {c: [] for c in CLOCKS} for n in cases}
    for r in range(rounds):
        order = list(cases.items())
        if r % 2:
            order.reverse()
        for name, case in order:
            times: dict[str, list[float]] = {c: [] for c in CLOCKS}
            for _ in range(calls):
                started = {c: clock() for c, clock in CLOCKS.items()}
                case()
                for c, clock in CLOCKS.items():
                    times[c].append(clock() - started[c])
            for c in CLOCKS:
                found[name][c].append(statistics.median(times[c]) * 1e3)
    for name, by_clock in found.items():
        figures = "  ".join(f"{c} {statistics.median(v):7.2f}" for c, v in by_clock.items())
        print(f"  {name:42s} {figures} ms")


def same_bits(a: Any, b: Any) -> bool:
    left = np.ascontiguousarray(a, dtype=np.float64)
    right = np.ascontiguousarray(b, dtype=np.float64)
    return left.shape == right.shape and bool(
        np.array_equal(left.view(np.int64), right.view(np.int64))
    )


def in_two(call: Callable[[Any], Any], rows: Any, pool: ThreadPoolExecutor) -> Any:
    """``call`` on two halves of ``rows``, the second on the pool's thread."""
    first, second = np.array_split(rows, 2)
    other = pool.submit(call, second)
    return np.concatenate([call(first), other.result()])


def stored(folder: Path, model: str) -> tuple[Any, Any]:
    """The stored Pipeline of ``model`` and ``make bench``'s 10,000-row frame."""
    ref = next(r for r in sb.REFERENCES if r.model == model)
    dataset = sb.load_dataset(ref.dataset)
    version = trained(Path(__file__).resolve().parent.parent, folder, ref, dataset)
    artifact = next((folder / "data" / "artifacts").glob(f"{model}--*/{version}.joblib"))
    frame = sb.workloads(dataset, True, np.random.default_rng(sb.SEED))["rows_10000"].frames[0]
    return joblib.load(artifact), frame


def xgboost_engines(folder: Path, rounds: int, pool: ThreadPoolExecutor) -> None:
    pipeline, frame = stored(folder, "bench-xgboost")
    estimator = pipeline[-1]
    rows = np.asarray(pipeline[:-1].transform(frame), dtype=np.float64)
    compiled = restore_model(pipeline, "classification", 10_000)
    two_threads = copy.deepcopy(estimator.get_booster())
    two_threads.set_param({"nthread": 2})
    twin = threaded_twin(estimator, 2)
    expected = estimator.predict_proba(rows)
    cases: dict[str, Callable[[], Any]] = {
        "predict_proba, one call, 1 thread": lambda: estimator.predict_proba(rows),
        "predict_proba, 2 parts on 2 threads": lambda: in_two(estimator.predict_proba, rows, pool),
        "inplace_predict, 2 threads, one call": lambda: two_threads.inplace_predict(rows),
        "predict_proba of the 2-thread twin (new)": lambda: twin.predict_proba(rows),
        "compiled (GTIL), one call": lambda: compiled.predict_with_proba(rows)[1],
    }
    for name, case in cases.items():
        got = case()
        got = np.column_stack([1 - got, got]) if got.ndim == 1 else got
        print(f"  {name}: predict_proba's bits: {same_bits(got, expected)}")
    medians(cases, rounds, 5)


def boosting_engines(folder: Path, rounds: int, pool: ThreadPoolExecutor) -> None:
    pipeline, frame = stored(folder, "bench-gb")
    estimator = pipeline[-1]
    rows = np.asarray(pipeline[:-1].transform(frame), dtype=np.float64)
    expected = estimator.decision_function(rows)

    def walk(part: Any) -> Any:
        return boosted_raw(estimator, part)

    print(f"  boosted_raw: decision_function's bits: {same_bits(walk(rows).ravel(), expected)}")
    cases: dict[str, Callable[[], Any]] = {
        "predict_proba (predict_stages), one call": lambda: estimator.predict_proba(rows),
        "boosted_raw, one call": lambda: walk(rows),
        "boosted_raw, 2 parts on 2 threads": lambda: in_two(walk, rows, pool),
    }
    medians(cases, rounds, 5)


def arrow_check(rounds: int) -> None:
    _, frame = stored(Path(ARGS.data), "bench-gb")
    table = pa.Table.from_pandas(frame, preserve_index=False)
    features = tuple(FeatureColumn(name, "float64", False) for name in table.column_names)
    signature = ModelSignature("classification", "gradient_boosting", features, (0, 1), None)
    names = tuple(table.column_names)

    def checked_and_stacked(large_rows: int) -> Callable[[], Any]:
        def run() -> Any:
            small_tables.LARGE_ROWS = large_rows
            return stack_columns(check_table(signature, table).columns, names)

        return run

    old, new = checked_and_stacked(0), checked_and_stacked(small_tables.LARGE_ROWS)
    print(f"  the same matrix, bit for bit: {same_bits(old(), new())}")
    medians({"column by column (before)": old, "one matrix": new}, rounds, 7)


ARGS = argparse.Namespace()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/tree-cpu-ab")
    parser.add_argument("--rounds", type=int, default=9)
    parser.parse_args(namespace=ARGS)
    folder = Path(ARGS.data)
    print(f"load average at start {os.getloadavg()}")
    with ThreadPoolExecutor(1) as pool:
        print("\n1. XGBoost 100 rounds, 10,000 rows")
        xgboost_engines(folder, ARGS.rounds, pool)
        print("\n2. gradient boosting 100, 10,000 rows")
        boosting_engines(folder, ARGS.rounds, pool)
    print("\n3. a 10,000-row Arrow table of 30 float64 columns: checked, then the matrix")
    arrow_check(ARGS.rounds)
    print(f"\nload average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
