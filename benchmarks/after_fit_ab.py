"""What a 500-round LightGBM job costs from LightGBM's fit returning to its verdict, in
process, the job's way (``train(on_fitted=EngineVerdict.start)``, then ``result()``):
one JSON line per run with that span's wall and the process's CPU over it, the
``metrics_sha`` of ``benchmarks/train_stages.py`` and the verdict without its timings.
Run two trees alternately (``PYTHONPATH`` picks the tree):

    PYTHONPATH=/work/main .venv/bin/python benchmarks/after_fit_ab.py 200000 500
    PYTHONPATH=. .venv/bin/python benchmarks/after_fit_ab.py 200000 500
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the service (app/__init__.py)

import hashlib
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_scale import table

from ensembles.data import select_training_data, table_from_frame
from ensembles.engine_verdict import EngineVerdict
from ensembles.explain.trees import preload
from ensembles.kinds import lightgbm_scores
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble

TIMED = ("compile_seconds", "check_seconds", "crossover_rows")


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def main() -> None:
    rows, size = int(sys.argv[1]), int(sys.argv[2])
    preload()
    frame = table(rows, 20)
    data = select_training_data(table_from_frame(frame), "target", task="classification")
    raw = {"kind": "lightgbm", "params": {"n_estimators": size}}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    stamps: dict[str, tuple[float, float]] = {}
    read = lightgbm_scores.ScoreWatch.answers

    def answers(self: Any, estimator: Any, X: Any) -> Any:
        stamps.setdefault("fit_returned", (time.perf_counter(), _cpu()))
        return read(self, estimator, X)

    lightgbm_scores.ScoreWatch.answers = answers  # type: ignore[method-assign]
    pool = MemberPool.local()
    verdict = EngineVerdict(data.task, 0, pool.task_threads)
    started = time.perf_counter()
    fitted = train(
        data,
        spec,
        EvaluationSpec(holdout_fraction=0.0, cv_folds=0),
        0,
        pool=pool,
        on_fitted=verdict.start,
        on_explaining=verdict.explaining,
    )
    inference = verdict.result()
    done, cpu = time.perf_counter(), _cpu()
    at, cpu_at = stamps["fit_returned"]
    figures = json.dumps(fitted.metrics.model_dump(), sort_keys=True, default=str)
    print(
        json.dumps(
            {
                "tree": os.environ.get("PYTHONPATH", ""),
                "to_fit_returned": round(at - started, 2),
                "after_fit": round(done - at, 3),
                "after_fit_cpu": round(cpu - cpu_at, 3),
                "load": round(os.getloadavg()[0], 1),
                "metrics_sha": hashlib.sha256(figures.encode()).hexdigest()[:12],
                "inference": {k: v for k, v in inference.items() if k not in TIMED},
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
