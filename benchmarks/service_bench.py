"""`make bench`: the real service under load, next to the in-process scikit-learn floor.

What it does, on 127.0.0.1 only and in a few minutes:

1. starts the service as ``make run`` does (``python -m app``: uvicorn with
   ``--workers`` server processes, default 1 or ``ENSEMBLE_WORKERS``) on a free port with
   a temporary data folder;
2. uploads breast_cancer and diabetes (scikit-learn's own copies), trains one small
   untimed model (the first job also starts the training fork server), then trains the
   reference models THROUGH THE API, each ``--training-rounds`` times: a random forest (100 trees),
   gradient boosting (100 stages), a soft vote of logistic regression + random forest (50)
   + gaussian NB, a stacking of the same three under a logistic regression, a 100-round
   LightGBM and a 100-round XGBoost classifier (all on breast_cancer) and a random forest
   regressor (100 trees, diabetes).  The training
   figure is the wall time from the submit call to the version being visible
   (``GET .../versions/{n}`` answers 200), against a direct fit of the very same
   scikit-learn Pipeline on the same rows in this process;
3. for each model, downloads its artifact (the stored scikit-learn Pipeline) and measures
   the **in-process floor**: ``predict_proba`` (classification) or ``predict``
   (regression) on the same rows, one call at a time in this process;
4. loads the service with wrk (or a Python fallback, see ``loadgen.py``):
   single-row requests with 1 client (latency p50/p95/p99) and with 16 clients
   (throughput), then 100-row and 10,000-row requests with 1 client.  Single rows are
   sent as records, batches as columnar JSON, and the same 10,000 rows once more as an
   Arrow IPC stream body (options in the query string); classification requests ask for
   probabilities.  Before timing, every body's answer is checked against the floor
   model: labels identical, probabilities/values within 1e-9.

Every figure is the median over ``--rounds`` rounds, with the spread (min-max of the
rounds) beside it.  Each service round follows a floor round on the same rows (paired:
this host's speed moves 20-50% over minutes), and a ratio is the median of the rounds' own
ratios, its spread beside it (latency: service / floor, lower is better; throughput:
service / floor, higher is better).  The table is printed (Markdown)
and written as JSON to ``benchmarks/results/latest.json`` or ``--json PATH``.

    make bench                                   # or:
    .venv/bin/python benchmarks/service_bench.py [--rounds 3] [--seconds 2] [--quick]
        [--json PATH] [--label TEXT] [--python-loadgen] [--workers N] [--scale]
    make bench BENCH_ARGS="--only bench-train-scale --scale"   # only the 200,000-row rows

``--scale`` ends the run with training at scale, the 200,000 x 20 case: a 100-tree random
forest and a 500-round LightGBM, each round a direct fit and then the service, side by
side (``--training-rounds`` rounds; the ratio of every round, goals 1.1 and 1.15).
    ENSEMBLE_WORKERS=2 make bench                # two server processes
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import joblib
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import train_scale
from loadgen import JSON, LoadGenerator, Run, find_wrk
from sklearn import datasets

from ensembles import (
    FeatureColumn,
    build_pipeline,
    parse_estimator_spec,
    resolve_ensemble,
    select_training_data,
    table_from_frame,
)

ROOT = Path(__file__).resolve().parent.parent
SEED = 42
TOLERANCE = 1e-9
ARROW = "application/vnd.apache.arrow.stream"
EVALUATION = {"holdout_fraction": 0.0, "cv_folds": 0}  # the service fits the same rows
BASE_MEMBERS: list[dict[str, Any]] = [
    {"name": "lr", "kind": "logistic_regression"},
    {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 50}},
    {"name": "nb", "kind": "gaussian_nb"},
]


@dataclass(frozen=True)
class Reference:
    """One reference model: what to train, on which dataset."""

    model: str  # model name in the service
    label: str  # as printed
    dataset: str
    ensemble: dict[str, Any]
    forest: bool  # the "below the floor" target applies
    # Issue 22's single-row target: no worse than this reference model's 1-row p50.
    single_row_as: str | None = None

    @property
    def task(self) -> str:
        return "regression" if self.dataset == "diabetes" else "classification"


REFERENCES = [
    Reference(
        "bench-rf",
        "random forest 100 (breast_cancer)",
        "breast_cancer",
        {"kind": "random_forest", "params": {"n_estimators": 100}},
        True,
    ),
    Reference(
        "bench-gb",
        "gradient boosting 100 (breast_cancer)",
        "breast_cancer",
        {"kind": "gradient_boosting", "params": {"n_estimators": 100}},
        False,
    ),
    Reference(
        "bench-voting",
        "soft voting lr+rf50+nb (breast_cancer)",
        "breast_cancer",
        {"kind": "voting", "params": {"voting": "soft"}, "estimators": BASE_MEMBERS},
        False,
    ),
    Reference(
        "bench-stacking",
        "stacking lr+rf50+nb -> lr (breast_cancer)",
        "breast_cancer",
        {
            "kind": "stacking",
            "estimators": BASE_MEMBERS,
            "final_estimator": {"kind": "logistic_regression"},
        },
        False,
    ),
    Reference(
        "bench-lightgbm",
        "LightGBM 100 rounds (breast_cancer)",
        "breast_cancer",
        {"kind": "lightgbm", "params": {"n_estimators": 100}},
        False,
        single_row_as="bench-rf",
    ),
    Reference(
        "bench-xgboost",
        "XGBoost 100 rounds (breast_cancer)",
        "breast_cancer",
        {"kind": "xgboost", "params": {"n_estimators": 100}},
        False,
        single_row_as="bench-rf",
    ),
    Reference(
        "bench-rf-reg",
        "random forest regressor 100 (diabetes)",
        "diabetes",
        {"kind": "random_forest", "params": {"n_estimators": 100}},
        True,
    ),
]
LOADERS = {"breast_cancer": datasets.load_breast_cancer, "diabetes": datasets.load_diabetes}
WARM_UP = Reference(
    "bench-warm-up",
    "warm-up",
    "diabetes",
    {"kind": "random_forest", "params": {"n_estimators": 5}},
    True,
)


@dataclass(frozen=True)
class Scenario:
    key: str
    label: str
    size: int  # rows per request
    clients: int
    n_bodies: int
    body: str = "json"  # json (records for one row, else columnar) or arrow (IPC stream)


SCENARIOS = [
    Scenario("single_1", "1 row, 1 client", 1, 1, 16),
    Scenario("single_16", "1 row, 16 clients", 1, 16, 16),
    Scenario("rows_100", "100 rows, 1 client", 100, 1, 4),
    Scenario("rows_10000", "10,000 rows, 1 client", 10_000, 1, 2),
    Scenario("rows_10000_arrow", "10,000 rows as Arrow, 1 client", 10_000, 1, 2, "arrow"),
    # Issue 24: a one-row table body from 16 clients serves at least what it does from one.
    Scenario("single_1_arrow", "1 row as Arrow, 1 client", 1, 1, 16, "arrow"),
    Scenario("single_16_arrow", "1 row as Arrow, 16 clients", 1, 16, 16, "arrow"),
]
# Issue 24's batched and unbatched rows: these scenarios of the first model measured,
# against the same data folder served with batching on (the default) and off.
BATCHING_MODEL = "bench-rf"
BATCHING_SCENARIOS = ("single_16", "single_16_arrow")
# Rounds of the batching block at least (issue 24.1 compares its two bodies' req/s round by
# round: the same row as JSON and as Arrow, seconds apart, their order swapped each round).
PAIRED_ROUNDS = 8


# --------------------------------------------------------------------------- the service


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def service(folder: Path, workers: int, **settings: str) -> Iterator[str]:
    """The service as `make run` starts it (``python -m app``), with ``workers`` server
    processes and ``settings`` (ENSEMBLE_* variables), on a free loopback port; yields
    its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "ENSEMBLE_DATA_DIR": str(folder / "data"),
        "ENSEMBLE_WORKERS": str(workers),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        **settings,
    }
    env.pop("ENSEMBLE_API_KEYS", None)
    log_path = folder / "service.log"
    command = [sys.executable, "-m", "app"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        until_ready(process, base, log_path)
        yield base
    finally:
        stop(process)


def until_ready(
    process: subprocess.Popen[bytes], base: str, log_path: Path, timeout_s: float = 60
) -> None:
    """Return once ``base``/readyz answers 200; RuntimeError with the log's tail if the
    process exits or ``timeout_s`` passes first.  One client for every poll: ``httpx.get``
    builds one (its SSL context) per call, ~40 ms of CPU every 0.1 s, taken from the
    service's start and its fork server's preload."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=base, timeout=1) as client:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the service exited:\n{log_path.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if client.get("/readyz").status_code == 200:
                    return
            if time.monotonic() > deadline:
                tail = log_path.read_text()[-3000:]
                raise RuntimeError(f"the service did not get ready:\n{tail}")
            time.sleep(0.1)


def stop(process: subprocess.Popen[bytes], timeout_s: float = 40) -> None:
    """SIGINT (a graceful shutdown), then SIGKILL after ``timeout_s``."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --------------------------------------------------------------------------- data, training


@dataclass
class Dataset:
    frame: pd.DataFrame  # features + "target"
    X: pd.DataFrame
    y: np.ndarray[Any, Any]
    features: list[FeatureColumn]
    task: Any
    dataset_id: str = ""


def load_dataset(name: str) -> Dataset:
    frame = LOADERS[name](as_frame=True).frame
    data = select_training_data(table_from_frame(frame), "target")
    features = [FeatureColumn(f.name, f.dtype, f.n_missing > 0, f.n_unique) for f in data.features]
    return Dataset(frame, data.X, data.y, features, data.task)


def upload(client: httpx.Client, name: str, frame: pd.DataFrame) -> str:
    columns = list(frame.columns)
    rows = [list(r) for r in zip(*(frame[c].tolist() for c in columns), strict=True)]
    response = client.post("/v1/datasets", json={"name": name, "columns": columns, "rows": rows})
    response.raise_for_status()
    return str(response.json()["id"])


def train_once(
    client: httpx.Client, ref: Reference, dataset_id: str
) -> tuple[float, dict[str, Any]]:
    """Submit, then poll until the version is visible: (wall seconds, version document)."""
    body = {
        "dataset_id": dataset_id,
        "target": "target",
        "task": ref.task,
        "ensemble": ref.ensemble,
        "evaluation": EVALUATION,
        "random_state": SEED,
    }
    started = time.perf_counter()
    response = client.post(f"/v1/models/{ref.model}/versions", json=body)
    if response.status_code != 202:
        raise RuntimeError(f"training {ref.model} refused: {response.text}")
    job = response.json()
    url = f"/v1/models/{ref.model}/versions/{job['version']}"
    polls = 0
    while True:
        got = client.get(url)
        if got.status_code == 200:
            return time.perf_counter() - started, got.json()
        polls += 1
        if polls % 25 == 0:
            state = client.get(f"/v1/jobs/{job['id']}").json()
            if state["status"] in ("failed", "cancelled"):
                raise RuntimeError(f"training {ref.model} {state['status']}: {state['error']}")
        time.sleep(0.02)


def direct_fit(ref: Reference, data: Dataset) -> float:
    """The same scikit-learn Pipeline the service builds, fitted here on the same rows
    (scikit-learn's defaults otherwise: n_jobs unset, BLAS threads as the machine has)."""
    spec = resolve_ensemble(parse_estimator_spec(ref.ensemble), data.task)
    pipeline = build_pipeline(spec, data.task, data.features, SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings: the service hides them too
        started = time.perf_counter()
        pipeline.fit(data.X, data.y)
        return time.perf_counter() - started


# --------------------------------------------------------------------------- rows and bodies


@dataclass
class Workload:
    """The frames of one scenario (for the floor) and the request bodies (the same rows),
    sent with ``content_type`` to the predict URL plus ``query``."""

    frames: list[pd.DataFrame]
    bodies: list[bytes]
    content_type: str = JSON
    query: str = ""


def arrow_body(frame: pd.DataFrame, metadata: bool = True) -> bytes:
    """The rows as an Arrow IPC stream: one column per feature, as a client would send it
    (``metadata``: with pandas' schema metadata, as ``Table.from_pandas`` writes it)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if not metadata:
        table = table.replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def workloads(data: Dataset, classifier: bool, rng: np.random.Generator) -> dict[str, Workload]:
    options = {"return_proba": True} if classifier else {}
    columns = list(data.X.columns)
    out: dict[str, Workload] = {}
    by_size: dict[tuple[int, int], Workload] = {}
    for scenario in SCENARIOS:
        key = (scenario.size, scenario.n_bodies)
        if key not in by_size:
            frames = [
                data.X.iloc[rng.integers(0, len(data.X), scenario.size)].reset_index(drop=True)
                for _ in range(scenario.n_bodies)
            ]
            bodies = []
            for frame in frames:
                if scenario.size == 1:
                    instances: Any = frame.to_dict(orient="records")
                else:
                    instances = {"columns": columns, "data": frame.to_numpy().tolist()}
                bodies.append(json.dumps({"instances": instances, "options": options}).encode())
            by_size[key] = Workload(frames, bodies)
        same_rows = by_size[key]
        if scenario.body == "arrow":  # the very rows of the JSON scenario of this size
            query = "?return_proba=true" if classifier else ""
            bodies = [arrow_body(frame) for frame in same_rows.frames]
            out[scenario.key] = Workload(same_rows.frames, bodies, ARROW, query)
        else:
            out[scenario.key] = same_rows
    return out


def check_answers(
    client: httpx.Client, url: str, pipeline: Any, classifier: bool, work: Workload
) -> float:
    """Each body's answer against the floor model: labels identical, values within 1e-9."""
    worst = 0.0
    headers = {"Content-Type": work.content_type}
    for frame, body in zip(work.frames, work.bodies, strict=True):
        response = client.post(url + work.query, content=body, headers=headers)
        if response.status_code != 200:
            raise RuntimeError(f"predict answered {response.status_code}: {response.text[:500]}")
        answer = response.json()
        if classifier:
            labels = np.asarray(pipeline.predict(frame)).tolist()
            if labels != answer["predictions"]:
                raise RuntimeError(f"labels differ from the stored model's at {url}")
            expected = pipeline.predict_proba(frame)
            got = np.asarray(answer["probabilities"], dtype=np.float64)
        else:
            expected = pipeline.predict(frame)
            got = np.asarray(answer["predictions"], dtype=np.float64)
        worst = max(worst, float(np.max(np.abs(np.asarray(expected) - got))))
    if worst > TOLERANCE:
        raise RuntimeError(f"answers differ from the stored model's by {worst:.3g} at {url}")
    return worst


# --------------------------------------------------------------------------- measuring


def floor_rounds(
    call: Callable[[pd.DataFrame], Any], frames: list[pd.DataFrame], rounds: int, budget_s: float
) -> list[float]:
    """Per round, the median seconds of one call, cycling through ``frames``."""
    call(frames[0])  # warm
    started = time.perf_counter()
    call(frames[0])
    estimate = max(time.perf_counter() - started, 1e-6)
    n = int(min(400, max(5, budget_s / rounds / estimate)))
    medians = []
    for _ in range(rounds):
        times = []
        for i in range(n):
            frame = frames[i % len(frames)]
            t0 = time.perf_counter()
            call(frame)
            times.append(time.perf_counter() - t0)
        medians.append(float(np.median(times)))
    return medians


def summary(values: list[float]) -> dict[str, float]:
    return {"median": float(np.median(values)), "min": min(values), "max": max(values)}


def measure_model(
    client: httpx.Client,
    base: str,
    ref: Reference,
    data: Dataset,
    version: dict[str, Any],
    load: LoadGenerator,
    args: argparse.Namespace,
) -> dict[str, Any]:
    classifier = ref.task == "classification"
    number = version["version"]
    artifact = client.get(f"/v1/models/{ref.model}/versions/{number}/artifact")
    artifact.raise_for_status()
    pipeline = joblib.load(io.BytesIO(artifact.content))
    floor_call = pipeline.predict_proba if classifier else pipeline.predict
    work = workloads(data, classifier, np.random.default_rng(SEED))
    url = f"{base}/v1/models/{ref.model}/versions/{number}/predict"
    path = url.removeprefix(base)
    max_diff = max(
        check_answers(client, path, pipeline, classifier, w)
        for w in {id(w): w for w in work.values()}.values()
    )
    # Warm-up, not recorded; 16 connections so that every server process loads the model.
    load.run(url, work["single_1"].bodies, 16, 1)
    result: dict[str, Any] = {
        "single_1": (url, work["single_1"].bodies),  # for side_by_side(); not written
        "model": ref.label,
        "kind": ref.ensemble["kind"],
        "task": ref.task,
        "engine": (version.get("inference") or {}).get("engine") or "scikit-learn",
        "inference": version.get("inference"),
        "answers_max_abs_diff": max_diff,
        "scenarios": {},
    }
    floor_call(work["single_1"].frames[0])  # warm
    for scenario in SCENARIOS:
        w = work[scenario.key]
        # Paired rounds: each service round right after a floor round on the same rows, so
        # that a ratio compares two figures taken seconds apart on this noisy host.
        budget = 1.0 if scenario.size >= 10_000 else 0.5
        floors: list[float] = []
        runs: list[Run] = []
        for _ in range(args.rounds):
            floors.append(floor_rounds(floor_call, w.frames, 1, budget)[0])
            runs.append(
                load.run(url + w.query, w.bodies, scenario.clients, args.seconds, w.content_type)
            )
        errors = sum(r.errors for r in runs)
        if errors:
            raise RuntimeError(f"{errors} failed requests in {ref.model} {scenario.label}")
        floor_s = summary(floors)
        latency_ratios = [r.latency_ms["p50"] / 1e3 / f for r, f in zip(runs, floors, strict=True)]
        throughput_ratios = [r.rps * f for r, f in zip(runs, floors, strict=True)]
        entry: dict[str, Any] = {
            "label": scenario.label,
            "rows": scenario.size,
            "clients": scenario.clients,
            "body": scenario.body,
            "requests": sum(r.requests for r in runs),
            "p50_ms": summary([r.latency_ms["p50"] for r in runs]),
            "p95_ms": summary([r.latency_ms["p95"] for r in runs]),
            "p99_ms": summary([r.latency_ms["p99"] for r in runs]),
            "rps": summary([r.rps for r in runs]),
            "floor_ms": {k: v * 1e3 for k, v in floor_s.items()},
            # the median of the rounds' own ratios (each round to the floor beside it)
            "latency_ratio_rounds": summary(latency_ratios),
            "throughput_ratio_rounds": summary(throughput_ratios),
        }
        entry["floor_rps"] = 1.0 / floor_s["median"]
        entry["latency_ratio"] = entry["latency_ratio_rounds"]["median"]
        entry["throughput_ratio"] = entry["throughput_ratio_rounds"]["median"]
        result["scenarios"][scenario.key] = entry
    return result


def measure_batching(
    folder: Path,
    ref: Reference,
    data: Dataset,
    version: dict[str, Any],
    load: LoadGenerator,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Req/s and p50 of ``BATCHING_SCENARIOS`` with batching on (the default) and off
    (``ENSEMBLE_BATCH_MAX_WAIT_MS=0``): two fresh services on the data folder of the
    bench's service (which trained, and keeps its training worker), their rounds alternating
    so that both see the same machine; and the batch sizes the batched one reported
    (``/metrics``) over its rounds.

    Also issue 24.1's figure: one Arrow row's req/s over one JSON row's at 16 clients, the
    ratio of each round's own runs (``PAIRED_ROUNDS`` at least, the two bodies' order
    swapped every round).  Taken from runs minutes apart (the main table) this ratio
    moved with the host by more than the bodies differ: 0.93x there and 1.03x in this
    block of the same run (2586a95)."""
    classifier = ref.task == "classification"
    work = workloads(data, classifier, np.random.default_rng(SEED))
    path = f"/v1/models/{ref.model}/versions/{version['version']}/predict"
    runs: dict[str, dict[str, list[Run]]] = {k: {"on": [], "off": []} for k in BATCHING_SCENARIOS}
    data_dir = {"ENSEMBLE_DATA_DIR": str(folder / "data")}
    (folder / "batched").mkdir()
    (folder / "unbatched").mkdir()
    with (
        service(folder / "batched", args.workers, **data_dir) as base,
        service(
            folder / "unbatched", args.workers, **data_dir, ENSEMBLE_BATCH_MAX_WAIT_MS="0"
        ) as off_base,
    ):
        bases = {"on": base, "off": off_base}
        for b in bases.values():
            load.run(b + path, work["single_1"].bodies, 16, 1)  # warm-up: load the model
        before = _batch_sizes(base)
        for turn in range(max(args.rounds, PAIRED_ROUNDS)):
            for key in BATCHING_SCENARIOS[:: 1 if turn % 2 == 0 else -1]:
                w = work[key]
                for mode, b in bases.items():
                    run = load.run(b + path + w.query, w.bodies, 16, args.seconds, w.content_type)
                    runs[key][mode].append(run)
        after = _batch_sizes(base)
    out: dict[str, Any] = {"model": ref.label, "scenarios": {}}
    for key, by_mode in runs.items():
        entry: dict[str, Any] = {"label": next(s.label for s in SCENARIOS if s.key == key)}
        for mode, mode_runs in by_mode.items():
            if any(r.errors for r in mode_runs):
                raise RuntimeError(f"failed requests with batching {mode} in {key}")
            entry[mode] = {
                "rps": summary([r.rps for r in mode_runs]),
                "p50_ms": summary([r.latency_ms["p50"] for r in mode_runs]),
            }
        entry["ratio"] = entry["on"]["rps"]["median"] / entry["off"]["rps"]["median"]
        out["scenarios"][key] = entry
    calls = after["count"] - before["count"]
    out["requests_per_call"] = (after["sum"] - before["sum"]) / calls if calls else 0.0
    out["arrow_over_json"] = paired_ratio(runs["single_16_arrow"]["on"], runs["single_16"]["on"])
    return out


def paired_ratio(runs: list[Run], baseline: list[Run]) -> dict[str, float]:
    """The req/s ratios of runs to the baseline's of the same round: median, spread, the
    rounds, and how many were at least 1x."""
    ratios = [run.rps / base.rps for run, base in zip(runs, baseline, strict=True)]
    return {**summary(ratios), "rounds": len(ratios), "at_least_1": sum(r >= 1 for r in ratios)}


def _batch_sizes(base: str) -> dict[str, float]:
    """The service's ``ensemble_batch_requests`` histogram: engine calls and requests."""
    text = httpx.get(f"{base}/metrics", timeout=30).text
    values = {"count": 0.0, "sum": 0.0}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name.startswith("ensemble_batch_requests_") and name[24:] in values:
            values[name[24:]] = float(value)
    return values


def render_batching(report: dict[str, Any]) -> str:
    batching = report.get("batching")
    if not batching:
        return ""
    lines = [
        "",
        "",
        f"Adaptive batching, {batching['model']}: batched (ENSEMBLE_BATCH_MAX_WAIT_MS=1, "
        "the default) and unbatched (0) services on the same data, rounds alternating; "
        f"batched: {batching['requests_per_call']:.1f} requests per engine call",
        "",
        "| request | batched req/s | spread | p50 ms | unbatched req/s | spread | p50 ms "
        "| batched / unbatched |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in batching["scenarios"].values():
        on, off = s["on"], s["off"]
        lines.append(
            f"| {s['label']} | {on['rps']['median']:.0f} | {_spread(on['rps'], '{:.0f}')} "
            f"| {on['p50_ms']['median']:.2f} | {off['rps']['median']:.0f} "
            f"| {_spread(off['rps'], '{:.0f}')} | {off['p50_ms']['median']:.2f} "
            f"| {s['ratio']:.2f}x |"
        )
    paired = batching.get("arrow_over_json")  # results written before it: none
    if paired:
        lines += [
            "",
            f"One row at 16 clients, batched, Arrow over JSON round by round (issue 24.1, "
            f"goal >= 1x): median {paired['median']:.3f}x, spread {_spread(paired, '{:.3f}')}"
            f", at least 1x in {paired['at_least_1']} of {paired['rounds']} rounds",
        ]
    return "\n".join(lines)


def side_by_side(
    models: list[dict[str, Any]], load: LoadGenerator, args: argparse.Namespace
) -> dict[str, Any]:
    """Issue 22's one-row goal compares two models' p50s; measured minutes apart, this
    host's drift decided it (each model's p50 moved 0.33-0.58 ms between runs).  Here
    the forest and the models held to it answer one row from one client in turns, round
    by round, and each round's p50 is divided by the forest's of the same round."""
    named = {r.label: r for r in REFERENCES}
    forest = next((m for m in models if named[m["model"]].model == BATCHING_MODEL), None)
    held = [m for m in models if named[m["model"]].single_row_as == BATCHING_MODEL]
    if forest is None or not held:
        return {}
    p50s: dict[str, list[float]] = {m["model"]: [] for m in [forest, *held]}
    for _ in range(args.rounds):
        for m in [forest, *held]:
            url, bodies = m["single_1"]
            p50s[m["model"]].append(load.run(url, bodies, 1, args.seconds).latency_ms["p50"])
    ratios = {
        m["model"]: summary(
            [a / b for a, b in zip(p50s[m["model"]], p50s[forest["model"]], strict=True)]
        )
        for m in held
    }
    return {
        "forest": forest["model"],
        "p50_ms": {label: summary(values) for label, values in p50s.items()},
        "ratio_to_forest": ratios,
    }


def render_side_by_side(report: dict[str, Any]) -> str:
    side = report.get("side_by_side")
    if not side:
        return ""
    lines = [
        "",
        "",
        f"One row, one client, in turns with {side['forest']} (issue 22: p50 no worse "
        "than the forest's; ratio = median of the rounds' own):",
        "",
        "| model | p50 ms | spread | p50 / forest's | spread |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, p50 in side["p50_ms"].items():
        ratio = side["ratio_to_forest"].get(label)
        ratio_text = f"{ratio['median']:.2f}x | {_spread(ratio)}" if ratio else "- | -"
        lines.append(f"| {label} | {p50['median']:.3f} | {_spread(p50, '{:.3f}')} | {ratio_text} |")
    return "\n".join(lines)


def targets(
    model: dict[str, Any],
    training: dict[str, Any],
    forest: bool,
    single_row_as: tuple[str, float] | None = None,
) -> dict[str, Any]:
    """The issue's targets for this model: (measured, goal, met).  ``single_row_as``:
    (label, 1-row p50 ms) of the model whose single-row latency is the goal (issue 22)."""
    s = model["scenarios"]
    one = s["single_1"]
    p50, floor = one["p50_ms"]["median"], one["floor_ms"]["median"]
    goal_single = floor if forest else floor + 1.0
    rule = "below the floor" if forest else "floor + 1 ms"
    if single_row_as is not None:
        rule, goal_single = f"no worse than {single_row_as[0]}", single_row_as[1]
    direct = training["direct_s"]["median"]
    out = {
        "single_row_p50": {
            "measured_ms": p50,
            "goal_ms": goal_single,
            "rule": rule,
            "met": p50 < goal_single if forest else p50 <= goal_single,
        },
        "throughput_16": {
            "measured_ratio": s["single_16"]["throughput_ratio"],
            "goal_ratio": 5.0,
            "met": s["single_16"]["throughput_ratio"] >= 5.0,
        },
        **{
            key: {
                "measured_ratio": s[key]["latency_ratio"],
                "goal_ratio": 1.5,
                "met": s[key]["latency_ratio"] <= 1.5,
            }
            for key in ("rows_10000", "rows_10000_arrow")
        },
        "training": {
            "measured_s": training["service_s"]["median"],
            "goal_s": 1.1 * direct + 1.0,
            "met": training["service_s"]["median"] <= 1.1 * direct + 1.0,
        },
    }
    return out


# --------------------------------------------------------------------------- HTTP floors

# The floors of any Python HTTP service here (benchmarks/floor_apps.py), run under uvicorn
# with the service's own options, in the same run as the service: its one-row figures are
# printed as ratios to them.
HTTP_FLOORS = {"bare ASGI": "floor_apps:bare", "trivial FastAPI": "floor_apps:trivial_fastapi"}
FLOOR_SCENARIOS = ("single_1", "single_16")


@contextlib.contextmanager
def floor_service(target: str) -> Iterator[str]:
    """The floor app ``target`` under uvicorn (httptools, uvloop, no access log: as the
    service runs) on a free loopback port; yields its predict URL."""
    port = free_port()
    command = [
        sys.executable, "-m", "uvicorn", target, "--app-dir", str(ROOT / "benchmarks"),
        "--host", "127.0.0.1", "--port", str(port), "--http", "httptools",
        "--loop", "uvloop", "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1/models/floor/versions/1/predict"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.post(url, content=b"{}", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the floor app {target} did not start")
            time.sleep(0.1)
        yield url
    finally:
        stop(process, timeout_s=20)


def measure_http_floors(
    load: LoadGenerator, bodies: list[bytes], args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    """Each floor app's one-row figures (1 and 16 clients), the same bodies as the service's."""
    by_key = {s.key: s for s in SCENARIOS}
    out: dict[str, dict[str, Any]] = {}
    for label, target in HTTP_FLOORS.items():
        with floor_service(target) as url:
            load.run(url, bodies, 16, 1)  # warm-up
            figures: dict[str, Any] = {}
            for key in FLOOR_SCENARIOS:
                clients = by_key[key].clients
                runs = [load.run(url, bodies, clients, args.seconds) for _ in range(args.rounds)]
                figures[key] = {
                    "p50_ms": summary([r.latency_ms["p50"] for r in runs]),
                    "rps": summary([r.rps for r in runs]),
                }
        out[label] = figures
        print(
            f"measured the {label} floor: "
            + ", ".join(f"{k} {v['rps']['median']:.0f} req/s" for k, v in figures.items()),
            flush=True,
        )
    return out


def render_http_floors(report: dict[str, Any]) -> list[str]:
    """The one-row rows against the HTTP floors measured in the same run (empty: none)."""
    floors = report.get("http_floors")
    if not floors:
        return []
    labels = list(floors)
    lines = [
        "",
        "One row against the HTTP floors of the same run (bare ASGI app and a trivial "
        "FastAPI route under uvicorn; req/s: ours / floor, higher is better; p50: ours / "
        "floor, lower is better):",
        "",
        "| model | request | req/s | p50 ms | "
        + " | ".join(f"{x} req/s | {x} p50 ms | req/s / {x} | p50 / {x}" for x in labels)
        + " |",
        "|---|---|---:|---:|" + "---:|---:|---:|---:|" * len(labels),
    ]
    for m in report["models"]:
        for key in FLOOR_SCENARIOS:
            ours = m["scenarios"][key]
            rps, p50 = ours["rps"]["median"], ours["p50_ms"]["median"]
            cells = []
            for x in labels:
                floor = floors[x][key]
                f_rps, f_p50 = floor["rps"]["median"], floor["p50_ms"]["median"]
                cells.append(f"{f_rps:.0f} | {f_p50:.2f} | {rps / f_rps:.2f}x | {p50 / f_p50:.2f}x")
            lines.append(
                f"| {m['model']} | {ours['label']} | {rps:.0f} | {p50:.2f} | "
                + " | ".join(cells)
                + " |"
            )
    return lines


# --------------------------------------------------------------------------- report


def _spread(d: dict[str, float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(d['min'])}-{fmt.format(d['max'])}"


def _ratio_spread(scenario: dict[str, Any], which: str) -> str:
    """`` (min-max)`` of the paired rounds' ratios; nothing for results written before."""
    rounds = scenario.get(f"{which}_ratio_rounds")
    return f" ({_spread(rounds)})" if rounds else ""


def render(report: dict[str, Any]) -> str:
    lines = [
        f"Ensemble Service benchmark ({report['label']}) - {report['machine']['summary']}",
        f"load generator: {report['load_generator']}; "
        f"server processes (ENSEMBLE_WORKERS): {report.get('workers', 1)}",
        f"{report['rounds']} rounds of {report['seconds']:g} s per figure; medians, "
        "spread = min-max over rounds; floor = the stored scikit-learn model's "
        "predict_proba/predict on the same rows, in one process, a floor round before "
        "every service round; ratios: median (min-max) of the rounds' own",
        "",
        "| model | engine | request | p50 ms | p95 ms | p99 ms | p50 spread | req/s "
        "| floor ms | floor req/s | p50 / floor | req/s / floor |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in report["models"]:
        for s in m["scenarios"].values():
            lines.append(
                f"| {m['model']} | {m['engine']} | {s['label']} | {s['p50_ms']['median']:.2f} "
                f"| {s['p95_ms']['median']:.2f} | {s['p99_ms']['median']:.2f} "
                f"| {_spread(s['p50_ms'])} | {s['rps']['median']:.0f} "
                f"| {s['floor_ms']['median']:.2f} | {s['floor_rps']:.0f} "
                f"| {s['latency_ratio']:.2f}x{_ratio_spread(s, 'latency')} "
                f"| {s['throughput_ratio']:.2f}x{_ratio_spread(s, 'throughput')} |"
            )
    lines += [
        "",
        "| model | service: submit to visible, s | spread | of which train() | "
        "direct fit, s | spread | service / direct | overhead, s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in report["training"]:
        svc, direct = t["service_s"], t["direct_s"]
        lines.append(
            f"| {t['model']} | {svc['median']:.2f} | {_spread(svc)} "
            f"| {t['train_s']['median']:.2f} | {direct['median']:.2f} | {_spread(direct)} "
            f"| {svc['median'] / direct['median']:.2f}x "
            f"| {svc['median'] - direct['median']:.2f} |"
        )
    lines += ["", "Targets of issue 6 (met / not met):"]
    for m in report["models"]:
        t = m.get("targets")
        if t is None:  # results written before the targets were recorded
            continue
        single = t["single_row_p50"]
        arrow = t.get("rows_10000_arrow")  # results written before Arrow bodies: none
        as_arrow = (
            f", as Arrow {arrow['measured_ratio']:.2f}x {_mark(arrow['met'])}" if arrow else ""
        )
        lines.append(
            f"  {m['model']}: 1-row p50 {single['measured_ms']:.2f} ms vs {single['rule']} "
            f"{single['goal_ms']:.2f} ms {_mark(single['met'])}; 16-client throughput "
            f"{t['throughput_16']['measured_ratio']:.1f}x floor (goal 5x) "
            f"{_mark(t['throughput_16']['met'])}; 10,000 rows "
            f"{t['rows_10000']['measured_ratio']:.2f}x floor (goal 1.5x) "
            f"{_mark(t['rows_10000']['met'])}{as_arrow}; training "
            f"{t['training']['measured_s']:.2f} s vs 1.1 x direct + 1 s = "
            f"{t['training']['goal_s']:.2f} s {_mark(t['training']['met'])}"
        )
    lines += render_http_floors(report)
    return "\n".join(lines)


def _single_row_goal(report: dict[str, Any], ref: Reference) -> tuple[str, float] | None:
    """(label, 1-row p50) of the model ``ref``'s single-row target names, if measured."""
    named = next((r for r in REFERENCES if r.model == ref.single_row_as), None)
    measured = [m for m in report["models"] if named is not None and m["model"] == named.label]
    if named is None or not measured:
        return None
    return named.label, float(measured[0]["scenarios"]["single_1"]["p50_ms"]["median"])


def _mark(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = {"python": platform.python_version()}
    for name in ("scikit-learn", "numpy", "treelite", "fastapi", "uvicorn", "orjson"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    commit = _git("rev-parse", "--short", "HEAD") + ("+changes" if _git("status", "-s") else "")
    cores = os.cpu_count()
    return {
        "cpu": cpu,
        "cores": cores,
        "platform": platform.platform(),
        "versions": versions,
        "commit": commit,
        "summary": f"{cores} x {cpu}, Python {versions['python']}, "
        f"scikit-learn {versions.get('scikit-learn')}, commit {commit}",
    }


def _git(*command: str) -> str:
    """A read-only git query (the commit measured), empty outside a clone."""
    done = subprocess.run(["git", *command], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def scale_rows(args: argparse.Namespace) -> dict[str, Any]:
    """``--scale``: training at scale, the 200,000 x 20 case (issue 24): a 100-tree random
    forest and a 500-round LightGBM, each round a direct fit and then the service's
    submit-to-visible wall time, side by side; the ratio of each round, their median and
    spread.  Written to ``benchmarks/results/train_scale_200k.json``."""
    rounds = 1 if args.quick else args.training_rounds
    print(f"training at scale: 200,000 x 20, {rounds} round(s) each", flush=True)
    rows = [train_scale.paired(kind, rounds) for kind in ("random_forest", "lightgbm")]
    lines = [
        "| model | direct s (spread) | service s (spread) | train() s | ratio per round "
        "| median ratio | goal |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for row in rows:
        direct_s, service_s = summary(row["direct_s"]), summary(row["service_s"])
        ratios = summary(row["ratios"])
        lines.append(
            f"| {row['model']} | {direct_s['median']:.2f} ({_spread(direct_s)}) "
            f"| {service_s['median']:.2f} ({_spread(service_s)}) "
            f"| {summary(row['train_s'])['median']:.2f} "
            f"| {', '.join(f'{r:.2f}' for r in row['ratios'])} | {ratios['median']:.2f} "
            f"| {row['goal']:.2f} {_mark(max(row['ratios']) <= row['goal'])} |"
        )
    text = "\n".join(lines)
    print()
    print(text)
    report = {"machine": machine(), "rounds": rounds, "rows": rows, "table": text}
    out = ROOT / "benchmarks/results/train_scale_200k.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"written: {out}")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per load run")
    parser.add_argument("--training-rounds", type=int, default=3, help="trainings per model")
    parser.add_argument("--quick", action="store_true", help="1 round of 1 s (a smoke run)")
    parser.add_argument("--json", default=str(ROOT / "benchmarks/results/latest.json"))
    parser.add_argument("--label", default="make bench", help="recorded with the results")
    parser.add_argument("--python-loadgen", action="store_true", help="do not use wrk")
    parser.add_argument(
        "--only",
        action="append",
        help="only the reference models whose name contains this (repeat it for several: "
        "--only bench-rf --only bench-xgboost); bench-train-scale: only the training "
        "scenario at scale (benchmarks/train_scale.py); bench-train-lightgbm: only its "
        "500-round LightGBM scenario",
    )
    parser.add_argument(
        "--no-train-scale", action="store_true", help="skip the training scenario at scale"
    )
    parser.add_argument(
        "--scale",
        action="store_true",
        help="training at scale, the 200,000-row case (random forest and LightGBM against "
        "their direct fits, round by round), in place of benchmarks/train_scale.py's run; "
        "with --only bench-train-scale, only that",
    )
    parser.add_argument(
        "--no-http-floors",
        action="store_true",
        help="skip the bare ASGI and trivial FastAPI floors of the one-row figures",
    )
    parser.add_argument(
        "--no-batching", action="store_true", help="skip the batched / unbatched rows"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("ENSEMBLE_WORKERS", "1")),
        help="server processes (ENSEMBLE_WORKERS; default 1, or that variable)",
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.training_rounds = 1, 1.0, 1
    if args.scale and args.only == [train_scale.NAME]:
        scale_rows(args)
        return
    if args.only == [train_scale.NAME]:
        train_scale.main(["--quick"] if args.quick else [])
        return
    if args.only == [train_scale.LIGHTGBM_NAME]:
        train_scale.main(["--lightgbm", *(["--quick"] if args.quick else [])])
        return
    started = time.perf_counter()
    wrk, how = (None, "Python asyncio + httpx (forced)") if args.python_loadgen else find_wrk()
    print(f"load generator: {how}", flush=True)
    load = LoadGenerator(wrk)
    report: dict[str, Any] = {
        "label": args.label,
        "machine": machine(),
        "load_generator": how,
        "rounds": args.rounds,
        "seconds": args.seconds,
        "training_rounds": args.training_rounds,
        "workers": args.workers,
        "models": [],
        "training": [],
    }
    data = {name: load_dataset(name) for name in LOADERS}
    with (
        tempfile.TemporaryDirectory(prefix="ensemble-bench-") as tmp,
        service(Path(tmp), args.workers) as base,
    ):
        print(f"service: {base} (data folder {tmp}, {args.workers} server processes)", flush=True)
        with httpx.Client(base_url=base, timeout=120) as client:
            for name, dataset in data.items():
                dataset.dataset_id = upload(client, name, dataset.frame)
            if not args.no_http_floors:
                floor_bodies = workloads(data["breast_cancer"], True, np.random.default_rng(SEED))[
                    "single_1"
                ].bodies
                report["http_floors"] = measure_http_floors(load, floor_bodies, args)
            # Untimed: the first job of a fresh service also waits for the training fork
            # server to start (once per service, not per job).
            train_once(client, WARM_UP, data[WARM_UP.dataset].dataset_id)
            for ref in [
                r for r in REFERENCES if args.only is None or any(o in r.model for o in args.only)
            ]:
                dataset = data[ref.dataset]
                walls, versions = [], []
                for _ in range(args.training_rounds):
                    wall, version = train_once(client, ref, dataset.dataset_id)
                    walls.append(wall)
                    versions.append(version)
                directs = [direct_fit(ref, dataset) for _ in range(args.training_rounds)]
                training = {
                    "model": ref.label,
                    "service_s": summary(walls),
                    "train_s": summary([v["training"]["duration_s"] for v in versions]),
                    "direct_s": summary(directs),
                }
                report["training"].append(training)
                print(
                    f"trained {ref.label}: {training['service_s']['median']:.2f} s "
                    f"(direct fit {training['direct_s']['median']:.2f} s)",
                    flush=True,
                )
                model = measure_model(client, base, ref, dataset, versions[-1], load, args)
                if ref.model == BATCHING_MODEL and not args.no_batching:
                    report["batching"] = measure_batching(
                        Path(tmp), ref, dataset, versions[-1], load, args
                    )
                model["targets"] = targets(
                    model, training, ref.forest, _single_row_goal(report, ref)
                )
                report["models"].append(model)
                single = model["scenarios"]["single_1"]
                print(
                    f"measured {ref.label}: 1-row p50 {single['p50_ms']['median']:.2f} ms "
                    f"(floor {single['floor_ms']['median']:.2f} ms)",
                    flush=True,
                )
        if len(report["models"]) > 1:
            report["side_by_side"] = side_by_side(report["models"], load, args)
            for model in report["models"]:
                ratio = report["side_by_side"].get("ratio_to_forest", {}).get(model["model"])
                if ratio is not None:
                    model["targets"]["single_row_side_by_side"] = {
                        "measured_ratio": ratio["median"],
                        "goal_ratio": 1.0,
                        "met": ratio["median"] <= 1.0,
                    }
    for model in report["models"]:
        model.pop("single_1")
    load.close()
    report["elapsed_s"] = time.perf_counter() - started
    text = render(report) + render_batching(report) + render_side_by_side(report)
    print()
    print(text)
    print(f"\n({report['elapsed_s']:.0f} s in all)")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**report, "table": text}, indent=2) + "\n", encoding="utf-8")
    print(f"written: {out}")
    if args.scale:
        print()
        scale_rows(args)
    elif args.only is None and not args.no_train_scale:
        print()
        train_scale.main(["--quick"] if args.quick else [])
        print()
        train_scale.main(["--lightgbm", *(["--quick"] if args.quick else [])])


if __name__ == "__main__":
    main()
