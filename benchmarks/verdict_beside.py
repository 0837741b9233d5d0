"""The engine verdict after ``train()`` (as jobs did) against beside it
(:mod:`ensembles.engine_verdict`), in process, alternating, on the same generated rows.

Each round runs both ways in turn (the order swapping every round): ``train()`` then
``inference_verdict`` with the job's threads, and ``train(on_fitted=verdict.start,
on_explaining=verdict.explaining)`` then ``verdict.result()``.  Printed per run: wall
and process CPU seconds of train + verdict, the metrics' sha (must match between the two)
and the verdict without its seconds and crossover (must match too); at the end the
medians and the median of the per-round ratios beside / after.

    PYTHONPATH=. .venv/bin/python benchmarks/verdict_beside.py lightgbm 200000 500 3
    PYTHONPATH=. .venv/bin/python benchmarks/verdict_beside.py random_forest 200000 100 3
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_scale import LEAF, table

from ensembles.data import select_training_data, table_from_frame
from ensembles.engine_verdict import EngineVerdict
from ensembles.explain.trees import preload
from ensembles.inference import inference_verdict
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble

_TIMED = ("compile_seconds", "check_seconds", "crossover_rows")


def _once(mode: str, data: Any, spec: Any) -> dict[str, Any]:
    pool = MemberPool.local()
    evaluation = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
    wall, cpu = time.perf_counter(), time.process_time()
    waited: list[float] = []
    if mode == "after":
        fitted = train(data, spec, evaluation, 0, pool=pool)
        verdict = inference_verdict(
            fitted.pipeline, data.task, fitted.train_rows, 0, pool.task_threads
        )
        after_s = time.perf_counter() - wall - fitted.training["duration_s"]
    else:
        beside = EngineVerdict(data.task, 0, pool.task_threads)

        def start(pipeline: Any, X: Any) -> Any:
            wait = beside.start(pipeline, X)

            def timed_wait() -> None:
                started = time.perf_counter()
                wait()
                waited.append(time.perf_counter() - started)

            return timed_wait

        fitted = train(
            data, spec, evaluation, 0, pool=pool, on_fitted=start, on_explaining=beside.explaining
        )
        finishing = time.perf_counter()
        verdict = beside.result()
        after_s = time.perf_counter() - finishing
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    figures = json.dumps(fitted.metrics.model_dump(), sort_keys=True, default=str)
    decided = {k: v for k, v in verdict.items() if k not in _TIMED}
    return {
        "mode": mode,
        "wall": round(wall, 2),
        "cpu": round(cpu, 2),
        "train_s": fitted.training["duration_s"],
        "metrics_sha": hashlib.sha256(figures.encode()).hexdigest()[:12],
        "verdict_sha": hashlib.sha256(json.dumps(decided, sort_keys=True).encode()).hexdigest()[
            :12
        ],
        # after train(): the whole verdict (after), or the calibration (beside)
        "after_train_s": round(after_s, 2),
        "waited_in_train_s": round(waited[0], 2) if mode == "beside" else None,
        "compile_s": round(verdict["compile_seconds"], 2),
        "check_s": round(verdict["check_seconds"], 2),
        "engine": verdict["engine"],
        "crossover_rows": verdict["crossover_rows"],
    }


def main() -> None:
    kind, rows, size, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    preload()
    frame = table(rows, 20)
    data = select_training_data(table_from_frame(frame), "target", task="classification")
    forest = kind == "random_forest"
    params = {"n_estimators": size} | ({"min_samples_leaf": LEAF} if forest else {})
    spec = resolve_ensemble(parse_estimator_spec({"kind": kind, "params": params}), data.task)
    runs: dict[str, list[dict[str, Any]]] = {"after": [], "beside": []}
    for i in range(rounds):
        for mode in ("after", "beside") if i % 2 == 0 else ("beside", "after"):
            run = _once(mode, data, spec)
            runs[mode].append(run)
            print(json.dumps(run), flush=True)
    ratios = [b["wall"] / a["wall"] for a, b in zip(runs["after"], runs["beside"], strict=True)]
    summary = {
        mode: {
            "wall": statistics.median(r["wall"] for r in done),
            "cpu": statistics.median(r["cpu"] for r in done),
        }
        for mode, done in runs.items()
    }
    shas = {r["metrics_sha"] for done in runs.values() for r in done}
    verdicts = {r["verdict_sha"] for done in runs.values() for r in done}
    print(
        json.dumps(
            {
                "kind": kind,
                "rows": rows,
                "median": summary,
                "ratio_wall_beside_to_after": round(statistics.median(ratios), 3),
                "same_metrics": len(shas) == 1,
                "same_verdict": len(verdicts) == 1,
                "loadavg": os.getloadavg()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
