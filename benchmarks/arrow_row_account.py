"""A one-row Arrow request's CPU against a one-row JSON request's, stage by stage, in
process (no HTTP: what both share, the protocol, middleware, access log and metrics, is
left out).

On ``make bench``'s one-row bodies of the 100-tree random forest (``--data``: a data
folder ``tree_cpu_ab.py`` trained, as ``batch_turn_ab.py`` uses), for a loop turn of
``--batch`` requests of each kind, as the event loop path serves them
(``app.services.predictions``, ``app.batching``):

* Arrow: the body read from its bytes (``arrow_streams.float_rows``; ``--reader``: by
  ``bodies.read_table_body``, pyarrow's way), checked (``small_float_rows``, else
  ``small_float_matrix``; ``check_table`` with ``--reader``), the turn's columns
  joined, the engine's answer, split per request;
* JSON records: the body parsed (orjson and the request model), the turn's records
  checked together (``check_records_together``), the engine, the split;
* both: the response written (``_written``).

Stages alternate, round by round; each figure is the median over ``--rounds`` of the
calling thread's CPU per request (us).  The answers of both kinds are compared, bit for
bit, first.

    PYTHONPATH=. .venv/bin/python benchmarks/arrow_row_account.py [--data /tmp/onerow8-ab]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _cpu_per_call(fn: Callable[[], Any], calls: int) -> float:
    started = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/tmp/onerow8-ab")
    parser.add_argument("--model", default="bench-rf")
    parser.add_argument("--batch", type=int, default=6, help="requests of one loop turn")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--reader", action="store_true", help="Arrow bodies by pyarrow's reader")
    args = parser.parse_args()

    asyncio.run(_account(args))


async def _account(args: argparse.Namespace) -> None:
    import service_bench as sb
    from one_row_loop import connected

    from app.arrow_streams import float_rows
    from app.bodies import read_table_body
    from app.main import create_app
    from app.schemas.predictions import PredictOptionsIn
    from app.services import predictions as service
    from app.services.routing import target, target_inline
    from app.settings import Settings
    from ensembles.inference import PredictOptions, check_table, small_tables
    from ensembles.inference.batches import concat_columns, split_prediction
    from ensembles.inference.rows import check_records_together

    data = Path(args.data)
    version = json.loads((data / f"{args.model}.json").read_text())["version"]
    app = create_app(Settings(data_dir=data / "data"))
    lifespan, _ = await connected(app, 0)
    services = app.state.services
    chosen = target_inline(services, args.model, str(version), None)
    if chosen is None:
        chosen = target(services, args.model, str(version), None)
    servable = service.servable_for(services, chosen.record)
    signature = servable.signature
    work = sb.workloads(sb.load_dataset("breast_cancer"), True, np.random.default_rng(sb.SEED))
    arrow = work["single_1_arrow"].bodies[: args.batch]
    jsons = work["single_1"].bodies[: args.batch]
    options = PredictOptions(return_proba=True)
    table_options = PredictOptionsIn(return_proba=True)
    n = len(arrow)

    def arrow_read() -> list[Any]:
        if args.reader:
            return [read_table_body(body, "arrow", None) for body in arrow]
        return [float_rows(body) for body in arrow]

    def arrow_check(read: list[Any]) -> list[Any]:
        if args.reader:
            return [check_table(signature, table, None) for table in read]
        if hasattr(small_tables, "small_float_rows"):  # left one matrix (MatrixRows)
            return [small_tables.small_float_rows(signature, r.schema, r.matrix) for r in read]
        return [small_tables.small_float_matrix(signature, r.schema, r.matrix) for r in read]

    def json_parse() -> list[Any]:
        return [service._parse(body) for body in jsons]

    def json_check(requests: list[Any]) -> Any:
        return check_records_together(signature, [r.instances[0] for r in requests])

    for body in arrow:  # learnt (the schema, the layout) as a server learns it
        read_table_body(body, "arrow", None)
    read, requests = arrow_read(), json_parse()
    checked, together = arrow_check(read), json_check(requests)
    arrow_joined = concat_columns([c[0] for c in checked])
    arrow_answer = servable.predict(arrow_joined, options)
    json_answer = servable.predict(together.columns, options)
    same = np.array_equal(
        np.asarray(arrow_answer.probabilities).view(np.uint64),
        np.asarray(json_answer.probabilities).view(np.uint64),
    )
    print(f"Arrow and JSON answers the same bits: {same}")
    arrow_parts = split_prediction(arrow_answer, [1] * n)
    json_parts = split_prediction(json_answer, [1] * n)

    stages: dict[str, Callable[[], Any]] = {
        "arrow read": arrow_read,
        "arrow check": lambda: arrow_check(read),
        "arrow join": lambda: concat_columns([c[0] for c in checked]),
        "arrow engine": lambda: servable.predict(arrow_joined, options),
        "arrow split": lambda: split_prediction(arrow_answer, [1] * n),
        "arrow write": lambda: [
            service._written(chosen, servable, table_options, c[1], None, p)
            for c, p in zip(checked, arrow_parts, strict=True)
        ],
        "json parse": json_parse,
        "json check": lambda: json_check(requests),
        "json engine": lambda: servable.predict(together.columns, options),
        "json split": lambda: split_prediction(json_answer, [1] * n),
        "json write": lambda: [
            service._written(chosen, servable, r.options, list(together.warnings), r.instances, p)
            for r, p in zip(requests, json_parts, strict=True)
        ],
    }
    found: dict[str, list[float]] = {name: [] for name in stages}
    for _ in range(args.rounds):
        for name, fn in stages.items():
            found[name].append(_cpu_per_call(fn, args.calls) / n)
    print(f"CPU us per request, loop turns of {n}, median of {args.rounds} rounds")
    totals = {"arrow": 0.0, "json": 0.0}
    for name, values in found.items():
        median = statistics.median(values)
        totals[name.split()[0]] += median
        print(f"  {name:13s} {median:7.2f}")
    print(f"  arrow total   {totals['arrow']:7.2f}\n  json total    {totals['json']:7.2f}")
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"load average {load}")
    await lifespan.shutdown()


if __name__ == "__main__":
    main()
