"""Where a one-row prediction's time goes, stage by stage, in process (no HTTP), model
beside model.

For the 100-tree reference models of ``make bench`` (random forest, LightGBM, XGBoost on
breast_cancer, trained by the library as the service trains them, their compiled engine
made as a new version's is) it times on the same one-row JSON body: the body parsed
(``parse``), its row checked (``check``), the servable's prediction (``predict``), and
inside it the preprocessing (``transform``) and the engine's answer (``answer``); for a
compiled engine, the answer's own stages too: the row as GTIL reads it (``input``),
GTIL's scores of it (``scores``), the trees' scores as the answer gets them, input
included (``margins``: GTIL's, or LightGBM's own single-row predictor where it serves),
the link (``link``) and the label rule (``decide``).  Calls of every model and stage
alternate, so a busy machine slows them alike; each figure is the ``--quantile`` (default
20th percentile) of ``--repeats`` calls in microseconds of wall time (one thread: wall is
CPU unless the host preempts).

    PYTHONPATH=. .venv/bin/python benchmarks/one_row_stages.py [--repeats 3000]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn import datasets

from app.services import predictions as service
from ensembles import (
    EvaluationSpec,
    parse_estimator_spec,
    resolve_ensemble,
    select_training_data,
    table_from_frame,
    train,
)
from ensembles.inference import CompiledModel, PredictOptions, check_rows, prepare
from ensembles.inference.compiling import inference_verdict
from ensembles.inference.gtil import decide

SEED = 42
MODELS: dict[str, dict[str, Any]] = {
    "rf": {"kind": "random_forest", "params": {"n_estimators": 100}},
    "lightgbm": {"kind": "lightgbm", "params": {"n_estimators": 100}},
    "xgboost": {"kind": "xgboost", "params": {"n_estimators": 100}},
}


def stages(name: str) -> dict[str, Callable[[], Any]]:
    """The calls to time for one model: the service's stages, then its engine's."""
    frame = datasets.load_breast_cancer(as_frame=True).frame
    data = select_training_data(table_from_frame(frame), "target")
    spec = resolve_ensemble(parse_estimator_spec(MODELS[name]), data.task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = train(data, spec, EvaluationSpec(holdout_fraction=0.0, cv_folds=0), SEED)
    verdict = inference_verdict(model.pipeline, data.task, data.X, SEED)
    servable = prepare(model.pipeline, model.signature, verdict)
    row = data.X.iloc[[int(np.random.default_rng(SEED).integers(len(data.X)))]]
    options = {"return_proba": True}
    body = json.dumps({"instances": row.to_dict(orient="records"), "options": options}).encode()
    request = service._parse(body)
    checked = check_rows(servable.signature, request.instances)
    Xt = servable.transform(checked.columns)
    engine = servable.engine_for(1)
    calls: dict[str, Callable[[], Any]] = {
        "parse": lambda: service._parse(body),
        "check": lambda: check_rows(servable.signature, request.instances),
        "predict": lambda: servable.predict(checked.columns, PredictOptions(return_proba=True)),
        "transform": lambda: servable.transform(checked.columns),
        "answer": lambda: engine.answer(Xt, with_proba=True),
    }
    if isinstance(engine, CompiledModel):
        X = engine._input(Xt)
        assert X is not None
        scores = engine._scores(X)
        proba = engine._link(scores)
        ruled = proba if engine.plan.decision == "proba" else scores
        calls |= {
            "input": lambda: engine._input(Xt),
            "scores": lambda: engine._scores(X),
            "margins": lambda: engine._margins(Xt),
            "link": lambda: engine._link(scores),
            "decide": lambda: decide(ruled, engine.plan),
        }
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3000)
    parser.add_argument("--quantile", type=float, default=20.0)
    args = parser.parse_args()
    models = {name: stages(name) for name in MODELS}
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeats):
        for name, calls in models.items():
            for stage, call in calls.items():
                start = time.perf_counter()
                call()
                times.setdefault((name, stage), []).append(time.perf_counter() - start)
    names = list(models)
    print(f"| stage (us, p{args.quantile:g} of {args.repeats}) | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for stage in dict.fromkeys(s for calls in models.values() for s in calls):
        cells = [
            f"{np.percentile(times[(n, stage)], args.quantile) * 1e6:.1f}"
            if (n, stage) in times
            else "-"
            for n in names
        ]
        print(f"| {stage} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
