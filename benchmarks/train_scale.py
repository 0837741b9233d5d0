"""Training at a size where distribution matters: the service against scikit-learn.

A random forest (default: 300 trees, ``min_samples_leaf=20``) on a generated table
(default: 500,000 rows x 40 features, two classes; ``--quick``: 50,000 x 20, 60 trees),
timed three ways in one run, each ``--rounds`` times:

* **service, local workers**: ``python -m app`` on a free loopback port, from the submit
  call to the version (the submit asks ``?wait=true``: nothing is sent while the job
  trains, see :func:`train_and_wait`);
* **service, Dask**: the same with ``ENSEMBLE_DASK_SCHEDULER`` pointing at a
  ``distributed.LocalCluster`` of 2 worker processes x 1 thread started here;
* **direct**: ``RandomForestClassifier(..., n_jobs=-1, oob_score=True)`` fitted in this
  process on the same rows (the service also measures OOB; it fits all rows here:
  no hold-out, no cross-validation).

The ratios service / direct are printed (goal: at most 1.15 either way). The service does
more than the fit (members' scores, the OOB curve, the compiled-engine verdict, the
artifact with its sha256), all counted. Timings on a shared machine are noisy: compare
within one run.

``--lightgbm`` (issue 22): a 500-round LightGBM classifier (kind ``lightgbm``) on 200,000
x 20 rows (``--quick``: 50,000 x 20, 100 rounds), the service on local workers against
``LGBMClassifier(n_estimators=500, n_jobs=<CPUs>)`` fitted directly on the same rows with
the same threads (the service's worker uses a thread per CPU) and the service's OpenMP
wait policy, in a fresh process; goal: at most 1.15.

    make bench BENCH_ARGS="--only bench-train-scale [--quick]"      # or:
    .venv/bin/python benchmarks/train_scale.py [--quick] [--rows N] [--features N]
        [--trees N] [--rounds N] [--json PATH] [--lightgbm]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

NAME = "bench-train-scale"
LIGHTGBM_NAME = "bench-train-lightgbm"
ROOT = Path(__file__).resolve().parents[1]
SEED = 0
LEAF = 20
WAIT_POLL_S = 0.5  # the client's POLL_INTERVAL_S, should a ?wait=true answer 202
OPEN = ("queued", "running")


def table(rows: int, features: int) -> pd.DataFrame:
    X, y = make_classification(
        n_samples=rows,
        n_features=features,
        n_informative=max(2, features // 2),
        flip_y=0.05,
        random_state=SEED,
    )
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(features)])
    frame["target"] = np.where(y == 1, "yes", "no")
    return frame


def parquet(frame: pd.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.to_parquet(out, index=False)
    return out.getvalue()


def forest_spec(trees: int) -> dict[str, Any]:
    return {"kind": "random_forest", "params": {"n_estimators": trees, "min_samples_leaf": LEAF}}


def lightgbm_spec(boosting_rounds: int) -> dict[str, Any]:
    return {"kind": "lightgbm", "params": {"n_estimators": boosting_rounds}}


def through_service(
    body: bytes, ensemble: dict[str, Any], rounds: int, **settings: str
) -> list[tuple[float, float]]:
    """(seconds from submit to the version, of which ``train()``: fit and metrics),
    ``rounds`` times, on a fresh service."""
    with scale_service(body, ensemble, **settings) as train_once:
        return [train_once() for _ in range(rounds)]


@contextlib.contextmanager
def scale_service(
    body: bytes, ensemble: dict[str, Any], **settings: str
) -> Iterator[Callable[[], tuple[float, float]]]:
    """A fresh service with the table uploaded; yields a function that trains the
    ensemble once and answers (wall s from submit to the version, train() s)."""
    from service_bench import service

    with tempfile.TemporaryDirectory(prefix="ensemble-train-scale-") as tmp:
        limits = {"ENSEMBLE_MAX_UPLOAD_BYTES": str(len(body) + 1_000_000)}
        with (
            service(Path(tmp), 1, **limits, **settings) as base,
            httpx.Client(base_url=base, timeout=600) as client,
        ):
            request = uploaded_request(client, body, ensemble)
            yield lambda: _train(client, request)


def uploaded_request(client: httpx.Client, body: bytes, ensemble: dict[str, Any]) -> dict[str, Any]:
    """Upload the Parquet ``body``; the training request of ``ensemble`` on it (no hold-out,
    no cross-validation: the fit and what follows it, as the direct fit is timed)."""
    files = {"file": ("table.parquet", body, "application/vnd.apache.parquet")}
    uploaded = client.post("/v1/datasets", files=files, data={"name": "scale"})
    uploaded.raise_for_status()
    return {
        "dataset_id": uploaded.json()["id"],
        "target": "target",
        "task": "classification",
        "ensemble": ensemble,
        "evaluation": {"holdout_fraction": 0.0, "cv_folds": 0},
        "random_state": SEED,
    }


def paired(kind: str, rounds: int, rows: int = 200_000, features: int = 20) -> dict[str, Any]:
    """The 200,000-row case (``service_bench.py --scale``): each round a direct fit, then
    the same through the service, so every ratio compares two runs made side by side on
    this shared machine.  ``kind``: ``random_forest`` (100 trees against
    ``RandomForestClassifier(n_jobs=-1, oob_score=True)``; goal 1.1) or ``lightgbm`` (500
    rounds against ``LGBMClassifier`` with a thread per CPU; goal 1.15)."""
    frame = table(rows, features)
    forest = kind == "random_forest"
    size = 100 if forest else 500
    ensemble = forest_spec(size) if forest else lightgbm_spec(size)
    fit_direct = (
        (lambda: direct(frame, size, 1)[0])
        if forest
        else (lambda: direct_lightgbm(frame, size, 1)[0])
    )
    directs, walls, inside = [], [], []
    with scale_service(parquet(frame), ensemble) as through_service_once:
        for _ in range(rounds):
            directs.append(fit_direct())
            wall, train_s = through_service_once()
            walls.append(wall)
            inside.append(train_s)
            print(
                f"  {kind} {rows:,} x {features}: direct {directs[-1]:.2f} s, service "
                f"{wall:.2f} s (train() {train_s:.2f} s), ratio {wall / directs[-1]:.2f}",
                flush=True,
            )
    ratios = [w / d for w, d in zip(walls, directs, strict=True)]
    return {
        "model": f"{'random forest 100' if forest else 'LightGBM 500'} ({rows:,} x {features})",
        "direct_s": directs,
        "service_s": walls,
        "train_s": inside,
        "ratios": ratios,
        "goal": 1.1 if forest else 1.15,
    }


def _train(client: httpx.Client, request: dict[str, Any]) -> tuple[float, float]:
    wall, version = train_and_wait(client, "scale", request)
    return wall, float(version["training"]["duration_s"])


def train_and_wait(
    client: httpx.Client, model: str, request: dict[str, Any]
) -> tuple[float, dict[str, Any]]:
    """Train a version and wait for it as a client does, without load on the machine:
    (seconds from the submit to the version, the version document).

    The submit asks ``?wait=true``: the server answers when the job has ended (201 with
    the version), and nothing is sent while the job trains.  Should the wait end first
    (202 after ``ENSEMBLE_WAIT_TIMEOUT_S``), the job is read every WAIT_POLL_S, as the
    client's ``wait_job`` does.  This bench used to ask for the version and the job every
    50 ms: the server and this process then spent 0.08-0.16 s of CPU a second, taken from
    the fit they timed (2 cores; on a shared host, from the share of the bench's session),
    so the service's ``train()`` of the 200,000-row forest was slower than the same
    ``train()`` in process (issue 24 item 5; ``benchmarks/forest_worker_gap.py``)."""
    started = time.perf_counter()
    response = client.post(f"/v1/models/{model}/versions", params={"wait": "true"}, json=request)
    if response.status_code == 202:  # still training when the wait ended: follow the job
        job = response.json()
        while (state := client.get(f"/v1/jobs/{job['id']}").json())["status"] in OPEN:
            time.sleep(WAIT_POLL_S)
        if state["status"] != "succeeded":
            raise RuntimeError(f"training {state['status']}: {state['error']}")
        response = client.get(f"/v1/models/{model}/versions/{job['version']}")
    if response.status_code not in (200, 201):
        raise RuntimeError(f"training {model} failed: {response.status_code} {response.text}")
    return time.perf_counter() - started, response.json()


def direct(frame: pd.DataFrame, trees: int, rounds: int) -> list[float]:
    X, y = frame.drop(columns="target").to_numpy(), frame["target"].to_numpy()
    walls = []
    for _ in range(rounds):
        forest = RandomForestClassifier(
            n_estimators=trees, min_samples_leaf=LEAF, oob_score=True, n_jobs=-1, random_state=SEED
        )
        started = time.perf_counter()
        forest.fit(X, y)
        walls.append(time.perf_counter() - started)
    return walls


# LightGBM's direct fit, in a process of its own: argv = parquet path, rounds of boosting,
# fits; prints the fits' seconds as JSON.
_LIGHTGBM_FIT = """
import json, os, sys, time
import lightgbm, pandas as pd
frame = pd.read_parquet(sys.argv[1])
X, y = frame.drop(columns="target"), frame["target"].to_numpy()
walls = []
for _ in range(int(sys.argv[3])):
    model = lightgbm.LGBMClassifier(
        n_estimators=int(sys.argv[2]), random_state=0, n_jobs=os.cpu_count(), verbose=-1
    )
    started = time.perf_counter()
    model.fit(X, y)
    walls.append(time.perf_counter() - started)
print(json.dumps(walls))
"""


def direct_lightgbm(frame: pd.DataFrame, boosting_rounds: int, rounds: int) -> list[float]:
    """LightGBM's own fit on the same rows, with a thread per CPU as the service's worker
    and the service's OpenMP wait policy (``app/__init__.py``: idle threads sleep), in a
    fresh process.  In this one, scikit-learn's OpenMP runtime spins beside LightGBM's:
    on a loaded machine that made the direct fit 3x slower than the service's (221 s
    against 67 s), which said nothing about the service."""
    env = {**os.environ}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    with tempfile.TemporaryDirectory(prefix="ensemble-train-scale-") as tmp:
        path = Path(tmp) / "table.parquet"
        path.write_bytes(parquet(frame))
        command = [sys.executable, "-c", _LIGHTGBM_FIT, str(path), str(boosting_rounds)]
        done = subprocess.run(
            [*command, str(rounds)], env=env, capture_output=True, text=True, check=True
        )
    walls: list[float] = json.loads(done.stdout.splitlines()[-1])
    return walls


def main_lightgbm(args: argparse.Namespace) -> dict[str, Any]:
    """The 500-round LightGBM scenario: the service on local workers against a direct fit."""
    rows = args.rows or (50_000 if args.quick else 200_000)
    features = args.features or 20
    boosting_rounds = args.trees or (100 if args.quick else 500)
    frame = table(rows, features)
    print(
        f"training at scale: LightGBM of {boosting_rounds} rounds on {rows:,} rows x "
        f"{features} features, {args.rounds} round(s), {os.cpu_count()} CPUs",
        flush=True,
    )
    directs = direct_lightgbm(frame, boosting_rounds, args.rounds)
    print(f"  direct fit (n_jobs={os.cpu_count()}): {directs}", flush=True)
    local = through_service(parquet(frame), lightgbm_spec(boosting_rounds), args.rounds)
    print(f"  service, local workers: {local} (wall, train())", flush=True)
    floor = statistics.median(directs)
    service_s = statistics.median([w for w, _ in local])
    text = "\n".join(
        [
            "| how | median s | ratio to direct | of which train() |",
            "|---|---:|---:|---:|",
            f"| LightGBM, direct fit | {floor:.2f} | 1.00 | - |",
            f"| service, local workers | {service_s:.2f} | {service_s / floor:.2f} "
            f"| {statistics.median([t for _, t in local]):.2f} |",
        ]
    )
    print()
    print(text)
    report = {
        "rows": rows,
        "features": features,
        "boosting_rounds": boosting_rounds,
        "rounds": args.rounds,
        "seconds": {"direct": directs, "service_local": [w for w, _ in local]},
        "train_s": {"service_local": [t for _, t in local]},
        "ratio": service_s / floor,
        "goal": 1.15,
        "table": text,
    }
    out = Path(args.json.replace("train_scale.json", "train_scale_lightgbm.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"written: {out}")
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50,000 x 20, 60 trees")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--features", type=int)
    parser.add_argument("--trees", type=int)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", default=str(ROOT / "benchmarks/results/train_scale.json"))
    parser.add_argument(
        "--lightgbm", action="store_true", help="500-round LightGBM on 200,000 x 20 rows"
    )
    args = parser.parse_args(argv)
    if args.lightgbm:
        return main_lightgbm(args)
    rows = args.rows or (50_000 if args.quick else 500_000)
    features = args.features or (20 if args.quick else 40)
    trees = args.trees or (60 if args.quick else 300)
    frame = table(rows, features)
    body = parquet(frame)
    print(
        f"training at scale: random forest of {trees} trees (min_samples_leaf={LEAF}) on "
        f"{rows:,} rows x {features} features, {args.rounds} round(s), "
        f"{os.cpu_count()} CPUs",
        flush=True,
    )
    from distributed import LocalCluster

    results: dict[str, list[float]] = {"direct": direct(frame, trees, args.rounds)}
    print(f"  direct fit (n_jobs=-1): {results['direct']}", flush=True)
    train_s: dict[str, list[float]] = {}
    local = through_service(body, forest_spec(trees), args.rounds)
    results["service_local"], train_s["service_local"] = (
        [w for w, _ in local],
        [t for _, t in local],
    )
    print(f"  service, local workers: {local} (wall, train())", flush=True)
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        on_dask = through_service(
            body, forest_spec(trees), args.rounds, ENSEMBLE_DASK_SCHEDULER=cluster.scheduler_address
        )
    results["service_dask"], train_s["service_dask"] = (
        [w for w, _ in on_dask],
        [t for _, t in on_dask],
    )
    print(f"  service, Dask (2 workers x 1 thread): {on_dask} (wall, train())", flush=True)
    floor = statistics.median(results["direct"])
    lines = [
        "| how | median s | runs | ratio to direct | of which train() (fit + metrics) |",
        "|---|---:|---|---:|---:|",
    ]
    for how, label in (
        ("direct", "scikit-learn, n_jobs=-1"),
        ("service_local", "service, local workers"),
        ("service_dask", "service, 2-worker LocalCluster"),
    ):
        median = statistics.median(results[how])
        runs = ", ".join(f"{v:.2f}" for v in results[how])
        inside = f"{statistics.median(train_s[how]):.2f}" if how in train_s else "-"
        lines.append(f"| {label} | {median:.2f} | {runs} | {median / floor:.2f} | {inside} |")
    text = "\n".join(lines)
    print()
    print(text)
    report = {
        "rows": rows,
        "features": features,
        "trees": trees,
        "min_samples_leaf": LEAF,
        "rounds": args.rounds,
        "seconds": results,
        "train_s": train_s,
        "ratios": {k: statistics.median(v) / floor for k, v in results.items()},
        "goal": 1.15,
        "table": text,
    }
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"written: {out}")
    return report


if __name__ == "__main__":
    main()
