"""What a 10,000-row JSON body costs over the same rows as Arrow, per model, in one server.

Issue 22 asks a 10,000-row JSON request of the 100-round XGBoost classifier to take no
more than 1.5x the library's in-process ``predict_proba``; its Arrow body is at ~1.06x.
``make bench`` measures each model's JSON and Arrow runs minutes apart, so on a shared
machine their difference moves with the load (one bench: 5 ms for the random forest, 11
for XGBoost, 12 for gradient boosting).  This script asks one server process of
``--tree`` for the same rows three ways in turn, request by request over one kept-alive
socket each (``json_rows_ab.RawClient``): ``make bench``'s columnar JSON body, its Arrow
IPC body (options in the query string), and the stored Pipeline's ``predict_proba`` on the
rows in this process (the floor; ``predict`` for a regressor); for each model of
``--models`` (trained through the server on one data folder).  The JSON and Arrow answers
are checked to be the same bytes first.  Printed per model: p10 and p50 wall time of
each, the server process's CPU per request (every thread, from /proc), and the
JSON-minus-Arrow gap in wall and CPU.

``--in-process`` (models named as in ``big_bodies.py``: xgboost, rf, gb, lightgbm) says
why, without HTTP, on the same body (``json.dumps``, as ``make bench`` writes it): it
checks that both bodies' checked columns become the same float64 matrix (dtype, C order,
bits) for the same engine with the same answer, then times in alternating rounds (thread
CPU of the calling thread, and process CPU, every thread) each body's reading and
checking, the matrix made, the engine's answer on either matrix, the whole prediction and
the response written.

The gap is what the JSON body costs of its own: the body's bytes are the same size
(2.4 MB), and once read both bodies give the same float64 matrix to the same engine and
the same response bytes.  Linux only (/proc).

    PYTHONPATH=. .venv/bin/python benchmarks/json_arrow_gap.py [--tree .]
        [--models bench-xgboost,bench-rf,bench-gb] [--requests 200]
    PYTHONPATH=. .venv/bin/python benchmarks/json_arrow_gap.py --in-process
        [--models xgboost,rf,gb] [--rounds 9]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the service (app/__init__.py)

import argparse
import contextlib
import statistics
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
from json_rows_ab import RawClient, trained, tree_service
from serving_cpu_ab import cpu_seconds

HERE = Path(__file__).resolve().parent.parent
WAYS = ("json", "arrow", "floor")


def both_ways(
    base: str, path: str, ref: sb.Reference, data: sb.Dataset
) -> tuple[RawClient, dict[str, list[Any]], list[Any]]:
    """The bench's 10,000-row bodies as JSON and as Arrow, prepared and sent once each
    (their answers must be the same bytes): the client, the prepared requests by way,
    and the rows' frames."""
    classifier = ref.task == "classification"
    works = sb.workloads(data, classifier, np.random.default_rng(sb.SEED))
    work = {"json": works["rows_10000"], "arrow": works["rows_10000_arrow"]}
    raw = RawClient(base)
    prepared = {
        way: [raw.request(f"{path}/predict{w.query}", body, w.content_type) for body in w.bodies]
        for way, w in work.items()
    }
    answers = {way: [raw.send(p) for p in bodies] for way, bodies in prepared.items()}
    if answers["json"] != answers["arrow"]:
        raise RuntimeError(f"{ref.model}: the JSON and Arrow answers differ")
    return raw, prepared, work["json"].frames


def gap(base: str, pid: int, client: httpx.Client, ref: sb.Reference, requests: int) -> None:
    """One model's three ways in turn, ``requests`` times each; printed."""
    data = sb.load_dataset(ref.dataset)
    path, _, pipeline = trained(client, ref, data)
    classifier = ref.task == "classification"
    raw, prepared, frames = both_ways(base, path, ref, data)
    call = pipeline.predict_proba if classifier else pipeline.predict
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    cpu = dict.fromkeys(WAYS, 0.0)
    for i in range(requests):
        k = i % len(frames)
        for way in WAYS if i % 2 == 0 else WAYS[::-1]:
            before = cpu_seconds(pid)
            started = time.perf_counter()
            if way == "floor":
                call(frames[k])
            else:
                raw.send(prepared[way][k])
            times[way].append(time.perf_counter() - started)
            if way != "floor":
                cpu[way] += cpu_seconds(pid) - before
    floor = statistics.median(times["floor"]) * 1e3
    print(f"\n{ref.model}: {requests} requests each, in turn (load {os.getloadavg()[0]:.2f})")
    for way in WAYS:
        p10, p50 = (float(v) * 1e3 for v in np.percentile(times[way], [10, 50]))
        used = f"  server CPU {cpu[way] / requests * 1e3:6.2f} ms" if way != "floor" else ""
        print(f"  {way:5s} p10 {p10:6.2f}  p50 {p50:6.2f} ms  {p50 / floor:4.2f}x floor{used}")
    wall = (statistics.median(times["json"]) - statistics.median(times["arrow"])) * 1e3
    extra = (cpu["json"] - cpu["arrow"]) / requests * 1e3
    print(f"  JSON - Arrow: p50 {wall:+.2f} ms, server CPU {extra:+.2f} ms")


def in_process(name: str, rounds: int) -> None:
    """One model's JSON and Arrow stages in this process (see the module); printed."""
    import json

    import big_bodies as bb
    import orjson
    from sklearn import datasets

    from app.bodies import read_table_body
    from app.services import predictions as service
    from ensembles import (
        EvaluationSpec,
        parse_estimator_spec,
        resolve_ensemble,
        select_training_data,
        table_from_frame,
        train,
    )
    from ensembles.inference import PredictOptions, check_rows, check_table, prepare
    from ensembles.inference.compiling import inference_verdict
    from ensembles.inference.row_parts import RowParts
    from ensembles.inference.servable import Servable

    frame = datasets.load_breast_cancer(as_frame=True).frame
    data = select_training_data(table_from_frame(frame), "target")
    spec = resolve_ensemble(parse_estimator_spec(bb.MODELS[name]), data.task)
    model = train(data, spec, EvaluationSpec(holdout_fraction=0.0, cv_folds=0), bb.SEED)
    verdict = inference_verdict(model.pipeline, data.task, data.X, bb.SEED)
    servable: Servable = prepare(model.pipeline, model.signature, verdict, RowParts(2))
    rng = np.random.default_rng(bb.SEED)
    rows = data.X.iloc[rng.integers(0, len(data.X), bb.ROWS)].reset_index(drop=True)
    instances = {"columns": list(rows.columns), "data": rows.to_numpy().tolist()}
    body = json.dumps({"instances": instances, "options": {"return_proba": True}}).encode()
    arrow = bb.arrow_body(rows)
    options = PredictOptions(return_proba=True)
    signature = servable.signature

    def json_columns() -> object:
        request = service._numeric_request(body, None)
        assert request is not None, "the JSON body did not take the numbers' path"
        return check_rows(signature, request.instances).columns

    def arrow_columns() -> object:
        return check_table(signature, read_table_body(arrow, "arrow", None)).columns

    def written(columns: object) -> bytes:
        prediction = servable.predict(columns, options)  # type: ignore[arg-type]
        out: dict[str, object] = {"predictions": prediction.predictions}
        out.update(prediction.as_dict())
        return orjson.dumps(out, option=orjson.OPT_SERIALIZE_NUMPY)

    by_json, by_arrow = json_columns(), arrow_columns()
    Xj, Xa = servable.transform(by_json), servable.transform(by_arrow)  # type: ignore[arg-type]
    for label, X in (("JSON", Xj), ("Arrow", Xa)):
        print(f"  {label:5s} matrix {X.dtype} {X.shape} C order {X.flags.c_contiguous}")
    if not np.array_equal(Xj, Xa) or Xj.dtype != Xa.dtype:
        raise RuntimeError("the two bodies' matrices differ")
    if written(by_json) != written(by_arrow):
        raise RuntimeError("the two bodies' answers differ")
    engine = servable.engine_for(bb.ROWS)
    print(f"  engine for {bb.ROWS} rows: {engine.name} (both bodies); same matrix, same answer")
    cases: dict[str, Callable[[], object]] = {
        "JSON read + checked": json_columns,
        "Arrow read + checked": arrow_columns,
        "matrix of JSON columns": lambda: servable.transform(by_json),  # type: ignore[arg-type]
        "matrix of Arrow columns": lambda: servable.transform(by_arrow),  # type: ignore[arg-type]
        "engine on JSON matrix": lambda: servable._answer(Xj, True),
        "engine on Arrow matrix": lambda: servable._answer(Xa, True),
        "predict + write, JSON columns": lambda: written(by_json),
        "predict + write, Arrow columns": lambda: written(by_arrow),
    }
    found: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in cases}
    for r in range(rounds):
        for label, case in list(cases.items())[:: -1 if r % 2 else 1]:
            for _ in range(5):
                thread, process = time.thread_time(), time.process_time()
                case()
                found[label][0].append(time.thread_time() - thread)
                found[label][1].append(time.process_time() - process)
    print(f"  medians of {rounds} x 5 calls (load {os.getloadavg()[0]:.2f}):")
    for label, (thread_cpu, process_cpu) in found.items():
        t, p = statistics.median(thread_cpu) * 1e3, statistics.median(process_cpu) * 1e3
        print(f"    {label:32s} thread CPU {t:6.2f} ms  process CPU {p:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(HERE))
    parser.add_argument("--models", default="bench-xgboost,bench-rf,bench-gb")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--in-process", action="store_true", help="stages without HTTP")
    parser.add_argument("--rounds", type=int, default=9, help="--in-process rounds")
    args = parser.parse_args()
    if args.in_process:
        from app.server.memory import keep_big_buffers_mapped

        keep_big_buffers_mapped()  # as a server process does
        models = "xgboost,rf,gb" if args.models.startswith("bench-") else args.models
        for name in models.split(","):
            print(f"\n{name}, in process:", flush=True)
            in_process(name, args.rounds)
        return
    print(f"tree {args.tree}; load average {os.getloadavg()}", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="json-arrow-gap-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        base, pid = stack.enter_context(tree_service(Path(args.tree), Path(tmp), "server.log"))
        client = stack.enter_context(httpx.Client(base_url=base, timeout=120))
        for model in args.models.split(","):
            ref = next(r for r in sb.REFERENCES if r.model == model)
            gap(base, pid, client, ref, args.requests)


if __name__ == "__main__":
    main()
