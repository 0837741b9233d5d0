"""A random forest's ``train()`` in process against the same training in the service's
job worker: wall, CPU, page faults and context switches of each, one line of JSON a run.

    PYTHONPATH=. .venv/bin/python benchmarks/forest_worker_gap.py inproc 200000 30
    PYTHONPATH=. .venv/bin/python benchmarks/forest_worker_gap.py forked 200000 30
    PYTHONPATH=. .venv/bin/python benchmarks/forest_worker_gap.py service 200000 30 \
        [ROUNDS] [WAITS]

``inproc`` runs :func:`ensembles.training.train` in this process as
``benchmarks/train_stages.py`` does (fit, then the figures; no verdict); ``forked`` the
same in a child of the service's training fork server (the library preloaded, the
worker's ``gc.freeze()``); ``service`` starts the service (``python -m app``), uploads
the same rows and trains them ``ROUNDS`` times, waiting for each job in turn the ways
``WAITS`` lists (comma-separated, cycled): ``0.05b`` asks for the version and the job
every 50 ms as ``train_scale`` did (``0.5``: the job only, every 0.5 s), reading the
job's stage and the worker's counters from ``/proc`` at each poll; ``wait`` waits as
``train_scale.train_and_wait`` does now (``?wait=true``), the stages read once a second
on the side.  Each service line has the worker's ``train()`` seconds, the fit's (from
the stages), and the server's and this process's CPU over the job.  ``GAP_POLL_COST=1``
ends with the CPU a second of the server idle and of the old polling.

On a shared host, run the two ways at once, each in a session of its own (``setsid``:
a scheduler autogroup each, as the bench's own session is), so both see the same load.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_scale import LEAF, SEED, parquet, table

TICK = os.sysconf("SC_CLK_TCK")


def _usage() -> dict[str, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu": own.ru_utime + own.ru_stime,
        "minflt": own.ru_minflt,
        "majflt": own.ru_majflt,
        "vcsw": own.ru_nvcsw,
        "ivcsw": own.ru_nivcsw,
    }


def inproc(rows: int, trees: int) -> dict[str, Any]:
    from ensembles.data import select_training_data, table_from_frame
    from ensembles.explain.trees import preload
    from ensembles.parallel import MemberPool
    from ensembles.specs import EvaluationSpec, parse_estimator_spec
    from ensembles.training import train
    from ensembles.validation import resolve_ensemble

    preload()
    frame = table(rows, 20)
    data = select_training_data(table_from_frame(frame), "target", task="classification")
    params = {"n_estimators": trees, "min_samples_leaf": LEAF}
    spec = resolve_ensemble(
        parse_estimator_spec({"kind": "random_forest", "params": params}), data.task
    )
    stamps: dict[str, tuple[float, dict[str, float]]] = {}

    def note(_done: int, _total: int, stage: str) -> None:
        stamps.setdefault(stage, (time.perf_counter(), _usage()))

    started, at_start = time.perf_counter(), _usage()
    fitted = train(
        data,
        spec,
        EvaluationSpec(holdout_fraction=0.0, cv_folds=0),
        SEED,
        pool=MemberPool.local(),
        on_progress=note,
    )
    ended, at_end = time.perf_counter(), _usage()
    fit_start, fit_usage = stamps.get("fitting", (started, at_start))
    fit_end, end_usage = stamps["evaluating"]
    return {
        "how": "inproc",
        "fit_s": round(fit_end - fit_start, 2),
        "train_s": round(ended - started, 2),
        "training": {k: v for k, v in fitted.training.items() if k.endswith("_s")},
        "fit": {k: round(end_usage[k] - fit_usage[k], 2) for k in fit_usage},
        "train": {k: round(at_end[k] - at_start[k], 2) for k in at_start},
        "oob": fitted.metrics.model_dump().get("oob"),
    }


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _proc(pid: int, threads: bool = False) -> dict[str, float] | None:
    """CPU s, faults and context switches of ``pid``, its threads summed."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        counts = {
            "cpu": (int(fields[11]) + int(fields[12])) / TICK,
            "minflt": float(fields[7]),
            "majflt": float(fields[9]),
            "vcsw": 0.0,
            "ivcsw": 0.0,
        }
        for task in Path(f"/proc/{pid}/task").iterdir() if threads else ():
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    counts["vcsw"] += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    counts["ivcsw"] += int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmHWM", "Threads")):
                counts[line.split(":")[0]] = float(line.split()[1])
        return counts
    except (OSError, IndexError, ValueError):
        return None


def _workers(server: int) -> list[int]:
    """The job worker processes: children of the server's fork server."""
    return [w for child in _children(server) for w in _children(child)]


def service(rows: int, trees: int, rounds: int, polls: list[str]) -> list[dict[str, Any]]:
    import subprocess

    from service_bench import free_port, stop, until_ready

    frame = table(rows, 20)
    body = parquet(frame)
    out = []
    with tempfile.TemporaryDirectory(prefix="forest-gap-") as tmp:
        port = free_port()
        env = {
            **os.environ,
            "ENSEMBLE_DATA_DIR": f"{tmp}/data",
            "ENSEMBLE_WORKERS": "1",
            "ENSEMBLE_MAX_UPLOAD_BYTES": str(len(body) + 1_000_000),
            "HOST": "127.0.0.1",
            "PORT": str(port),
        }
        log_path = Path(tmp) / "service.log"
        with open(log_path, "wb") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "app"], env=env, stdout=log, stderr=log
            )
        base = f"http://127.0.0.1:{port}"
        try:
            until_ready(server, base, log_path, timeout_s=300)
            with httpx.Client(base_url=base, timeout=600) as client:
                files = {"file": ("t.parquet", body, "application/vnd.apache.parquet")}
                got = client.post("/v1/datasets", files=files, data={"name": "gap"})
                got.raise_for_status()
                request = {
                    "dataset_id": got.json()["id"],
                    "target": "target",
                    "task": "classification",
                    "ensemble": {
                        "kind": "random_forest",
                        "params": {"n_estimators": trees, "min_samples_leaf": LEAF},
                    },
                    "evaluation": {"holdout_fraction": 0.0, "cv_folds": 0},
                    "random_state": SEED,
                }
                for i in range(rounds):
                    poll = polls[i % len(polls)]
                    if poll == "wait":
                        out.append(_waited_job(client, request, server.pid))
                    else:
                        bench = poll.endswith("b")
                        out.append(
                            _one_job(client, request, server.pid, float(poll.rstrip("b")), bench)
                        )
                    out[-1]["poll"] = poll
                    print(json.dumps(out[-1]), flush=True)
                if os.environ.get("GAP_POLL_COST"):
                    cost = _poll_cost(client, server.pid, out[-1]["job"])
                    print(json.dumps(cost), flush=True)
        finally:
            stop(server)
    return out


def _one_job(
    client: httpx.Client, request: dict[str, Any], server: int, poll_s: float, bench: bool
) -> dict[str, Any]:
    server_before = _proc(server)
    own_before = _usage()["cpu"]
    started = time.perf_counter()
    job = client.post("/v1/models/gap/versions", json=request).json()
    stages: dict[str, float] = {}
    first: dict[str, float] | None = None
    last: dict[str, float] | None = None
    worker = None
    at_fit_start: dict[str, float] | None = None
    at_fit_end: dict[str, float] | None = None
    while True:
        if bench:  # as train_scale._train: the version, then the job
            client.get(f"/v1/models/gap/versions/{job['version']}")
        state = client.get(f"/v1/jobs/{job['id']}").json()
        stage = state["progress"]["stage"]
        now = time.perf_counter()
        stages.setdefault(stage, now - started)
        if worker is None:
            found = _workers(server)
            worker = found[0] if found else None
        if worker is not None:
            seen = _proc(worker)
            if seen is not None:
                first = first or seen
                last = seen
                if stage == "fitting" and at_fit_start is None:
                    at_fit_start = seen
                if stage != "fitting" and "fitting" in stages and at_fit_end is None:
                    at_fit_end = seen
        if state["status"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(poll_s)
    wall = time.perf_counter() - started
    server_after = _proc(server)
    version = client.get(f"/v1/models/gap/versions/{job['version']}").json()
    assert first is not None and last is not None and server_before and server_after
    return {
        "how": "service",
        "job": {"id": job["id"], "version": job["version"]},
        "client_cpu": round(_usage()["cpu"] - own_before, 2),
        "status": state["status"],
        "stages": {k: round(v, 2) for k, v in stages.items()},
        "train_s": version["training"]["duration_s"],
        "training": {k: v for k, v in version["training"].items() if k.endswith("_s")},
        "inference": version.get("inference", {}).get("engine"),
        "wall_s": round(wall, 2),
        "worker_seen": {k: round(last[k] - first[k], 2) for k in ("cpu", "minflt", "majflt")},
        "worker_last": last,
        "fit_s": round(stages["evaluating"] - stages["fitting"], 2),
        "fit": None
        if at_fit_start is None or at_fit_end is None
        else {k: round(at_fit_end[k] - at_fit_start[k], 2) for k in at_fit_start},
        "worker_at_fit_end": at_fit_end,
        "server_cpu": round(server_after["cpu"] - server_before["cpu"], 2),
        "oob": version["metrics"].get("oob"),
    }


def _in_worker(rows: int, trees: int, answer: Any) -> None:
    """A job worker's set-up (:func:`app.jobs.worker.run_job` up to the registry), then
    :func:`inproc`; the result sent on ``answer``."""
    import gc
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()
    result = inproc(rows, trees)
    result["how"] = "forked"
    answer.send(result)


def forked(rows: int, trees: int) -> dict[str, Any]:
    """:func:`inproc` in a child of the service's training fork server."""
    from app.jobs import fork_server

    context = fork_server.context()
    reader, writer = context.Pipe(duplex=False)
    child = context.Process(target=_in_worker, args=(rows, trees, writer))
    child.start()
    writer.close()
    result: dict[str, Any] = reader.recv()
    child.join()
    return result


def _waited_job(client: httpx.Client, request: dict[str, Any], server: int) -> dict[str, Any]:
    """The job as ``train_scale.train_and_wait`` waits for it (``?wait=true``), its
    stages read once a second on a second connection."""
    import threading

    from train_scale import train_and_wait

    server_before, own_before = _proc(server), _usage()["cpu"]
    done: dict[str, Any] = {}
    started = time.perf_counter()

    def wait() -> None:
        done["wall"], done["version"] = train_and_wait(client, "gap", request)

    waiter = threading.Thread(target=wait)
    waiter.start()
    stages: dict[str, float] = {}
    cpu: dict[str, float] = {}
    with httpx.Client(base_url=str(client.base_url)) as side:
        while waiter.is_alive():
            waiter.join(1.0)
            jobs = side.get("/v1/jobs", params={"model": "gap", "limit": 1}).json()
            if jobs:
                stage = jobs[0]["progress"]["stage"]
                stages.setdefault(stage, time.perf_counter() - started)
                found = _workers(server)
                seen = _proc(found[0]) if found else None
                if seen is not None:
                    cpu.setdefault(stage, seen["cpu"])
    server_after = _proc(server)
    assert server_before is not None and server_after is not None
    version = done["version"]
    fit = (stages.get("evaluating", 0.0) - stages.get("fitting", 0.0)) if stages else None
    return {
        "how": "service",
        "client_cpu": round(_usage()["cpu"] - own_before, 2),
        "stages": {k: round(v, 2) for k, v in stages.items()},
        "train_s": version["training"]["duration_s"],
        "training": {k: v for k, v in version["training"].items() if k.endswith("_s")},
        "wall_s": round(done["wall"], 2),
        "fit_s": None if fit is None else round(fit, 2),
        "fit": {"cpu": round(cpu.get("evaluating", 0) - cpu.get("fitting", 0), 2)},
        "server_cpu": round(server_after["cpu"] - server_before["cpu"], 2),
        "oob": version["metrics"].get("oob"),
    }


def _poll_cost(client: httpx.Client, server: int, job: dict[str, Any]) -> dict[str, Any]:
    """CPU s per second of the server idle, and of the server and this process while
    polling as ``train_scale._train`` does (a version, then the job, every 50 ms)."""
    seconds = 20.0
    costs: dict[str, Any] = {}
    for how in ("idle", "bench_poll"):
        server_before, own_before = _proc(server), _usage()["cpu"]
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            if how == "bench_poll":
                client.get(f"/v1/models/gap/versions/{job['version'] + 1}")
                client.get(f"/v1/jobs/{job['id']}")
            time.sleep(0.05)
        server_after, own_after = _proc(server), _usage()["cpu"]
        assert server_before is not None and server_after is not None
        costs[how] = {
            "server_cpu_per_s": round((server_after["cpu"] - server_before["cpu"]) / seconds, 4),
            "client_cpu_per_s": round((own_after - own_before) / seconds, 4),
        }
    return costs


def main() -> None:
    how, rows, trees = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(f"load {os.getloadavg()}", file=sys.stderr)
    if how == "inproc":
        print(json.dumps(inproc(rows, trees)))
    elif how == "forked":
        print(json.dumps(forked(rows, trees)))
    else:
        rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 1
        polls = (sys.argv[5] if len(sys.argv) > 5 else "0.05b").split(",")
        service(rows, trees, rounds, polls)
    print(f"load {os.getloadavg()}", file=sys.stderr)


if __name__ == "__main__":
    main()
