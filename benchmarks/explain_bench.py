"""What explanations cost (issue 23), printed as figures, not asserted.

1. Through the real service (``python -m app`` on a loopback port, as ``make bench``
   starts it): the bench's 100-tree random forest (breast_cancer), one client, one row per
   request, explained (``options.explain``) against plain: p50 and p95 of the round trip;
   then 1,000 rows explained in one request.
2. In process, the same forest's explanation alone (no HTTP), and LightGBM's native
   ``pred_contrib`` on a 100-round LGBMClassifier fitted on the same rows (1 row and
   1,000 rows), since its kind is served by another branch.
3. Training overhead: ``training.explanations_s`` against the rest of ``duration_s`` for the
   bench forest, median of ``--trainings`` fits in process (``ensembles.training.train``:
   the job a worker runs, without the process start).

    PYTHONPATH=. .venv/bin/python benchmarks/explain_bench.py [--requests 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from ensembles.data import select_training_data, table_from_frame
from ensembles.explain.explanation import explain
from ensembles.explain.trees import preload
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service_bench import (  # the benchmarks folder is no package
    EVALUATION,
    REFERENCES,
    load_dataset,
    service,
    train_once,
    upload,
)

FOREST = REFERENCES[0]  # "random forest 100 (breast_cancer)"
SEED = 7


def percentiles(seconds: list[float]) -> str:
    ms = np.asarray(seconds) * 1e3
    return f"p50 {np.percentile(ms, 50):7.2f} ms  p95 {np.percentile(ms, 95):7.2f} ms"


def through_service(requests: int) -> None:
    data = load_dataset(FOREST.dataset)
    rows = data.X.to_dict(orient="records")
    with tempfile.TemporaryDirectory() as folder, service(Path(folder), 1) as base:
        client = httpx.Client(base_url=base, timeout=120)
        dataset_id = upload(client, FOREST.dataset, data.frame)
        train_once(client, FOREST, dataset_id)
        url = f"/v1/models/{FOREST.model}/versions/latest/predict"
        for explained in (False, True):
            options = {"explain": explained}
            client.post(url, json={"instances": rows[:1], "options": options})  # warm
            times = []
            for i in range(requests):
                body = {"instances": [rows[i % len(rows)]], "options": options}
                started = time.perf_counter()
                response = client.post(url, json=body)
                times.append(time.perf_counter() - started)
                response.raise_for_status()
            label = "explained" if explained else "plain    "
            print(f"service, 1 row, 1 client, {label}: {percentiles(times)}")
        batch = [rows[i % len(rows)] for i in range(1000)]
        times = []
        for _ in range(5):
            started = time.perf_counter()
            response = client.post(url, json={"instances": batch, "options": {"explain": True}})
            times.append(time.perf_counter() - started)
            response.raise_for_status()
        error = response.json()["explanations"]["additivity_error"]
        print(f"service, 1,000 rows explained: median {statistics.median(times):.3f} s "
              f"(additivity_error {error:.1e})")  # fmt: skip


def in_process(requests: int) -> None:
    data = load_dataset(FOREST.dataset)
    fitted = _fit(data)
    pipeline = fitted.pipeline
    Xt = np.asarray(pipeline[0].transform(data.X), dtype=np.float64)
    classes = fitted.signature.classes
    explain(pipeline, "classification", Xt[:1], classes)  # explainer built once
    times = []
    for i in range(requests):
        started = time.perf_counter()
        explain(pipeline, "classification", Xt[i % len(Xt) : i % len(Xt) + 1], classes).document()
        times.append(time.perf_counter() - started)
    print(f"in process, forest 100, 1 row: {percentiles(times)}")
    rows = Xt[np.arange(1000) % len(Xt)]
    started = time.perf_counter()
    explain(pipeline, "classification", rows, classes).document()
    print(f"in process, forest 100, 1,000 rows: {time.perf_counter() - started:.3f} s")
    _lightgbm(data.X.to_numpy(dtype=np.float64), np.asarray(data.y), requests)


def _lightgbm(X: np.ndarray[Any, Any], y: np.ndarray[Any, Any], requests: int) -> None:
    try:
        import lightgbm
    except ImportError:
        print("lightgbm not installed: no LightGBM rows")
        return
    from ensembles.explain.native import lightgbm_attribution

    model = lightgbm.LGBMClassifier(n_estimators=100, verbose=-1, random_state=SEED).fit(X, y)
    times = []
    for i in range(requests):
        started = time.perf_counter()
        lightgbm_attribution(model, X[i % len(X) : i % len(X) + 1], "margin")
        times.append(time.perf_counter() - started)
    print(f"in process, LightGBM 100 rounds (pred_contrib), 1 row: {percentiles(times)}")
    rows = X[np.arange(1000) % len(X)]
    started = time.perf_counter()
    lightgbm_attribution(model, rows, "margin")
    print(f"in process, LightGBM 100 rounds, 1,000 rows: {time.perf_counter() - started:.3f} s")


def _fit(data: Any) -> Any:
    """The bench forest as make bench trains it (its evaluation: no hold-out, so the
    explanations summarise the training rows)."""
    spec = resolve_ensemble(parse_estimator_spec(FOREST.ensemble), data.task)
    evaluation = EvaluationSpec(**EVALUATION)
    return train(
        select_training_data(table_from_frame(data.frame), "target"), spec, evaluation, SEED
    )


def training_overhead(trainings: int) -> None:
    data = load_dataset(FOREST.dataset)
    shares, explained, totals = [], [], []
    for _ in range(trainings):
        fitted = _fit(data)
        spent = fitted.training["explanations_s"]
        total = fitted.training["duration_s"]
        explained.append(spent)
        totals.append(total)
        shares.append(spent / (total - spent))
    block = fitted.metrics.explanations or {}
    print(
        f"training, forest 100: metrics.explanations {statistics.median(explained):.3f} s of "
        f"{statistics.median(totals):.3f} s ({100 * statistics.median(shares):.1f} % added; "
        f"{block.get('rows')} {block.get('evaluated_on')} rows, {block.get('method')})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--trainings", type=int, default=5)
    parser.add_argument("--no-service", action="store_true", help="in process only")
    args = parser.parse_args()
    preload()  # shap's compiled TreeSHAP, loaded once, as a service's first explanation does

    in_process(args.requests)
    training_overhead(args.trainings)
    if not args.no_service:
        through_service(args.requests)


if __name__ == "__main__":
    main()
