"""CPU per stage of a LightGBM training job, in process: one line of JSON per round.

What ``ensembles.jobs.train_and_publish`` does, less the registry: the stored table read
(``read_table`` + ``select_training_data``), ``train()`` with the engine verdict beside
the measuring (``EngineVerdict``), the calibration, the artifact dumped and hashed.  Each
stage gives (process CPU s, wall s): ``read->fitting`` runs to the first round's end
(preprocessing, LightGBM's Dataset), ``fitting->evaluating`` the other rounds,
``evaluating->trained`` the figures with the verdict's check beside them;
``main_after`` is the job thread's own CPU from the
end of the fit to train()'s return (the verdict's thread excluded); ``metrics_sha``
fingerprints the metrics.  On a shared machine run two trees alternately and compare CPU:

    PYTHONPATH=<tree> .venv/bin/python benchmarks/train_job_cpu.py 200000 500 1
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the service (app/__init__.py)

import joblib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_scale import parquet, table

from ensembles.data import read_table, select_training_data
from ensembles.engine_verdict import EngineVerdict
from ensembles.explain.trees import preload
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble


def one_job(body: bytes, size: int) -> dict[str, object]:
    stamps: dict[str, tuple[float, float, float]] = {}

    def mark(name: str) -> None:
        stamps.setdefault(name, (time.process_time(), time.perf_counter(), time.thread_time()))

    mark("start")
    table_read = read_table(body, filename="table.parquet")
    data = select_training_data(table_read, "target", None, "classification")
    raw = {"kind": "lightgbm", "params": {"n_estimators": size}}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    mark("read")
    pool = MemberPool.local()
    verdict = EngineVerdict(data.task, 0, pool.task_threads, None)
    fitted = train(
        data,
        spec,
        EvaluationSpec(holdout_fraction=0.0, cv_folds=0),
        0,
        pool=pool,
        on_progress=lambda _done, _total, stage: mark(stage),
        on_fitted=verdict.start,
    )
    mark("trained")
    verdict.result()
    mark("calibrated")
    dumped = io.BytesIO()
    joblib.dump(fitted.pipeline, dumped)
    hashlib.sha256(dumped.getvalue()).hexdigest()
    mark("dumped")
    names = ["start", "read", "fitting", "evaluating", "trained", "calibrated", "dumped"]
    out: dict[str, object] = {
        f"{a}->{b}": [round(stamps[b][i] - stamps[a][i], 2) for i in (0, 1)]
        for a, b in itertools.pairwise(names)
    }
    out["main_after"] = round(stamps["trained"][2] - stamps["evaluating"][2], 3)
    figures = json.dumps(fitted.metrics.model_dump(), sort_keys=True, default=str)
    out["metrics_sha"] = hashlib.sha256(figures.encode()).hexdigest()[:12]
    out["load"] = round(os.getloadavg()[0], 1)
    return out


def main() -> None:
    rows, size, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    preload()  # as the service's fork server does
    body = parquet(table(rows, 20))
    for _ in range(rounds):
        print(json.dumps(one_job(body, size)), flush=True)


if __name__ == "__main__":
    main()
