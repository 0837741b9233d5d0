"""The CPU of each stage after a big forest's fit, on one saved fit, for trees alternating.

Fitting the 100-tree forest on ``train_scale``'s 200,000 x 20 table takes a minute or
more; what follows it in a job (issue 24 item 5) is what changes between two commits.
``--save PATH`` fits it once, as ``train()`` does (no hold-out, no cross-validation), and
keeps the fit and its rows with joblib; ``PATH STAGE`` loads them and runs one stage,
printing one JSON line: the process's CPU (every thread) and wall over the stage, a sha
of the figures it made, and the 1-minute load average.  Stages: ``score`` (``score_fit``
on the job's threads, as ``train()`` runs it), ``check`` (the engine verdict's compile
and check on two GTIL threads; then the calibration's own CPU) and ``metrics`` (the
after-fit figures with the explanation summary, and the sha of the version's metrics,
as ``benchmarks/train_stages.py`` prints it, on the saved fit).  Run two trees in turn:

    PYTHONPATH=. .venv/bin/python benchmarks/forest_after_fit.py --save /tmp/forest.joblib
    PYTHONPATH=/work/main .venv/bin/python benchmarks/forest_after_fit.py /tmp/forest.joblib score
    PYTHONPATH=. .venv/bin/python benchmarks/forest_after_fit.py /tmp/forest.joblib score
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import joblib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_scale import LEAF, table

from ensembles import training
from ensembles.data import select_training_data, table_from_frame
from ensembles.evaluation import score_fit
from ensembles.explain.trees import preload
from ensembles.inference.compiling import calibrated, compile_model
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training_run import Run
from ensembles.validation import resolve_ensemble


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


def save(path: str) -> None:
    data = select_training_data(
        table_from_frame(table(200_000, 20)), "target", task="classification"
    )
    raw = {"kind": "random_forest", "params": {"n_estimators": 100, "min_samples_leaf": LEAF}}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    notes: list[str] = []
    rows = training._split(data, 0.0, 0, notes)
    started = time.perf_counter()
    fit = training._fit(data, spec, rows, 0, Run(None, None, MemberPool.local()), notes)
    joblib.dump({"fit": fit, "rows": rows, "notes": notes, "task": data.task}, path)
    print(json.dumps({"fit_s": round(time.perf_counter() - started, 1), "saved": path}))


def stage(path: str, name: str) -> None:
    saved = joblib.load(path)
    fit, rows, task = saved["fit"], saved["rows"], saved["task"]
    preload()
    run = Run(None, None, MemberPool.local())
    line: dict[str, Any] = {"stage": name}
    cpu, wall = _cpu(), time.perf_counter()
    if name == "score":
        with run.predicting():
            scores = score_fit(fit, rows, 0, [])
        line["sha"] = _sha([scores.on_train, scores.oob, scores.members, scores.curve])
    elif name == "check":
        compiled, report = compile_model(
            fit.pipeline, task, rows.X_train, 0, calibrate=False, threads=2
        )
        line["sha"] = _sha([report.ok, report.max_abs_diff, report.n_rows_checked])
        line["verdict"] = [report.ok, report.max_abs_diff, report.n_rows_checked]
        line["cpu"], line["wall"] = round(_cpu() - cpu, 2), round(time.perf_counter() - wall, 2)
        cpu, wall = _cpu(), time.perf_counter()
        calibrated(compiled, report, rows.X_train)
        line["calibration_cpu"] = round(_cpu() - cpu, 2)
    else:
        notes = list(saved["notes"])
        evaluation = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
        scores, cv, science = training._measure(
            fit,
            rows,
            None,  # type: ignore[arg-type]  # read only by cross-validation (none here)
            evaluation,
            0,
            run,
            notes,
            {},
        )
        science["explanations"], _ = training._explained(fit, rows, scores.Xbt, run, notes)
        metrics = training._metrics(fit, scores, cv, science, notes)
        line["metrics_sha"] = _sha(metrics.model_dump())
    if "cpu" not in line:
        line["cpu"], line["wall"] = round(_cpu() - cpu, 2), round(time.perf_counter() - wall, 2)
    line["load"] = round(os.getloadavg()[0], 1)
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--save":
        save(sys.argv[2])
    else:
        stage(sys.argv[1], sys.argv[2])
