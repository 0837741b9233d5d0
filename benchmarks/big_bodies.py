"""Where a 10,000-row prediction's time goes, stage by stage, in process (no HTTP).

For each reference model of ``make bench`` (trained by the library as the service trains
it, breast_cancer, compiled and calibrated as a new version is) it times, on the same
10,000 rows: the in-process floor (the stored Pipeline's ``predict_proba`` on a
DataFrame, as ``make bench`` measures it), then each stage of the service's big-body
path: the columnar JSON body read into the request (``read_body``), its rows checked
(``check``), the prediction (``predict``), the response written (``write``), and the same
for an Arrow IPC body; and each engine's answer on the preprocessed rows (the compiled
one, scikit-learn's or the library's own).  Medians of ``--repeats`` calls; the spread is
the interquartile range.  Figures are ratios to the floor measured in the same run.
The process keeps big buffers mapped as a server process does (``app.server.memory``);
``--default-malloc`` measures with glibc's default thresholds instead.  The prediction is
cut into parts on ``--threads`` threads as a server process cuts it (default: its ``auto``,
the CPUs this process may use; 1: one call, as before ``ENSEMBLE_PREDICT_THREADS``).

    PYTHONPATH=. .venv/bin/python benchmarks/big_bodies.py [--repeats 15] [--only gb] [--cpu]
        [--default-malloc] [--threads N] [--part-rows N]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.ipc as ipc
from sklearn import datasets

from app.bodies import read_table_body
from app.schemas.predictions import PredictRequest
from app.server.memory import keep_big_buffers_mapped
from app.services import predictions as service
from app.settings import available_cpus
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
from ensembles.inference.row_parts import DEFAULT_MIN_ROWS, RowParts

SEED = 42
ROWS = 10_000
MODELS: dict[str, dict[str, Any]] = {
    "rf": {"kind": "random_forest", "params": {"n_estimators": 100}},
    "gb": {"kind": "gradient_boosting", "params": {"n_estimators": 100}},
    "lightgbm": {"kind": "lightgbm", "params": {"n_estimators": 100}},
    "xgboost": {"kind": "xgboost", "params": {"n_estimators": 100}},
}


def read_json_body(body: bytes) -> PredictRequest:
    """The service's reading of a big JSON body (the numeric matrix when it applies)."""
    fast = getattr(service, "_numeric_request", None)  # absent before it was made
    request = fast(body, None) if fast is not None else None
    return request if request is not None else service._parse(body)


def median_ms(
    call: Callable[[], Any], repeats: int, clock: Callable[[], float]
) -> tuple[float, float]:
    """(median, interquartile range) in milliseconds."""
    call()  # warm
    out = []
    for _ in range(repeats):
        start = clock()
        call()
        out.append(clock() - start)
    q1, median, q3 = np.percentile(np.asarray(out) * 1e3, [25, 50, 75])
    return float(median), float(q3 - q1)


def arrow_body(frame: Any) -> bytes:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def measure(name: str, repeats: int, clock: Callable[[], float], parts: RowParts) -> dict[str, Any]:
    frame = datasets.load_breast_cancer(as_frame=True).frame
    data = select_training_data(table_from_frame(frame), "target")
    spec = resolve_ensemble(parse_estimator_spec(MODELS[name]), data.task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = train(data, spec, EvaluationSpec(holdout_fraction=0.0, cv_folds=0), SEED)
    pipeline = model.pipeline
    verdict = inference_verdict(pipeline, data.task, data.X, SEED)
    servable = prepare(pipeline, model.signature, verdict, parts)
    rng = np.random.default_rng(SEED)
    rows = data.X.iloc[rng.integers(0, len(data.X), ROWS)].reset_index(drop=True)
    columns = list(rows.columns)
    instances = {"columns": columns, "data": rows.to_numpy().tolist()}
    body = json.dumps({"instances": instances, "options": {"return_proba": True}}).encode()
    arrow = arrow_body(rows)
    options = PredictOptions(return_proba=True)
    request = read_json_body(body)
    checked = check_rows(servable.signature, request.instances)
    prediction = servable.predict(checked.columns, options)

    def write() -> bytes:
        out = {"model": "m", "version": 1, "predictions": prediction.predictions}
        out.update(prediction.as_dict())
        return orjson.dumps(out, option=orjson.OPT_SERIALIZE_NUMPY)

    def whole_json() -> bytes:
        parsed = read_json_body(body)
        cols = check_rows(servable.signature, parsed.instances).columns
        answer = servable.predict(cols, options)
        out = {"model": "m", "version": 1, "predictions": answer.predictions}
        out.update(answer.as_dict())
        return orjson.dumps(out, option=orjson.OPT_SERIALIZE_NUMPY)

    def whole_arrow() -> bytes:
        table = read_table_body(arrow, "arrow", None)
        cols = check_table(servable.signature, table).columns
        answer = servable.predict(cols, options)
        out = {"model": "m", "version": 1, "predictions": answer.predictions}
        out.update(answer.as_dict())
        return orjson.dumps(out, option=orjson.OPT_SERIALIZE_NUMPY)

    Xt = servable.transform(checked.columns)
    stages = {
        "floor": lambda: pipeline.predict_proba(rows),
        "orjson_loads": lambda: orjson.loads(body),
        "read_body": lambda: read_json_body(body),
        "check": lambda: check_rows(servable.signature, request.instances),
        "predict": lambda: servable.predict(checked.columns, options),
        "write": write,
        "json_total": whole_json,
        "arrow_total": whole_arrow,
    }
    for engine in servable.engines:
        stages[f"engine {engine.name}"] = lambda e=engine: e.answer(Xt, with_proba=True)
    times = {stage: median_ms(call, repeats, clock) for stage, call in stages.items()}
    floor = times["floor"][0]
    chosen = servable.engine_for(ROWS).name
    print(
        f"\n{name}: floor {floor:.2f} ms; engine for {ROWS} rows: {chosen}; "
        f"crossover {verdict.get('crossover_rows')}; body {len(body) / 1e6:.1f} MB; "
        f"{parts.parts_for(ROWS)} part(s) on {parts.threads} thread(s)"
    )
    for stage, (ms, iqr) in times.items():
        print(f"  {stage:28s} {ms:8.2f} ms  (iqr {iqr:.2f})  {ms / floor:5.2f}x floor")
    return {"model": name, "times_ms": times, "engine": chosen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--only", help="only this model (rf, gb, lightgbm, xgboost)")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="CPU seconds of the process (all its threads) instead of wall time: steadier "
        "on a shared machine",
    )
    parser.add_argument(
        "--default-malloc",
        action="store_true",
        help="glibc's default mmap and trim thresholds, not the server process's",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=available_cpus(),
        help="threads a prediction is cut over (default: the server's auto with one process)",
    )
    parser.add_argument("--part-rows", type=int, default=DEFAULT_MIN_ROWS)
    args = parser.parse_args()
    if not args.default_malloc:
        keep_big_buffers_mapped()
    clock = time.process_time if args.cpu else time.perf_counter
    for name in MODELS:
        if args.only is None or args.only == name:
            measure(name, args.repeats, clock, RowParts(args.threads, args.part_rows))


if __name__ == "__main__":
    main()
