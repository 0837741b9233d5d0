"""Two server processes (ENSEMBLE_WORKERS=2, ``python -m app``) on one port and one data
folder: either answers anything, the job limits are the service's, /metrics counts both,
and SIGTERM stops them all.

Which process serves a connection is the kernel's choice. The test learns it from the
JSON request lines (each names its ``pid``): a keep-alive connection whose first request
a given process served stays with that process, so a cancel can be sent, on purpose, to
the process that does not run the job. Then: a process that cannot start stops the
service (status 3); server processes do not outlive a killed launcher; a killed server
process is replaced, and its job failed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.server import ROOT, Server, alive, cmdline, descendants, in_group
from tests.network import free_port

# Each wait's bound: what a server process does here takes a second or two, but a full run
# beside other work (load 10-16) was seen to take more than 20 s to start a job's first
# member or to stop two server processes.
BOUND_S = 40.0
TABLE = {
    "columns": ["a", "b", "label"],
    "rows": [[i % 7 + 0.5, (i * 3) % 11 + 0.25, "xy"[i % 2]] for i in range(120)],
}
ROWS = [{"a": 0.5 + i % 7, "b": 0.25 + (i * 5) % 11} for i in range(16)]
PREDICTIONS = 60
PREDICT = "/v1/models/{name}/versions/{ref}/predict"


def _forest(dataset: str, n_estimators: int) -> dict[str, Any]:
    return {
        "dataset_id": dataset,
        "target": "label",
        "ensemble": {"kind": "random_forest", "params": {"n_estimators": n_estimators}},
        "random_state": 3,
    }


def _requests(server: Server) -> dict[str, dict[str, Any]]:
    """The request lines of the log so far, by request id."""
    lines = server.log_path.read_text(errors="replace").splitlines()
    entries = (json.loads(line) for line in lines if line.startswith("{"))
    return {e["request_id"]: e for e in entries if e.get("event") == "request"}


def _served_by(server: Server, request_id: str) -> int:
    deadline = time.monotonic() + BOUND_S
    while (entry := _requests(server).get(request_id)) is None:
        assert time.monotonic() < deadline, f"no log line for request {request_id}"
        time.sleep(0.02)
    return int(entry["pid"])


def _connection_to(server: Server, pid: int) -> httpx.Client:
    """A keep-alive connection that process ``pid`` accepted."""
    for _ in range(100):
        client = httpx.Client(base_url=server.url, timeout=BOUND_S)
        rid = uuid.uuid4().hex
        assert client.get("/healthz", headers={"X-Request-ID": rid}).status_code == 200
        if _served_by(server, rid) == pid:
            return client
        client.close()
    raise AssertionError(f"process {pid} accepted none of 100 connections")


def _new_connections(server: Server) -> httpx.Client:
    """A client that sends each request on a connection of its own (so either process may
    take it): one client, not one per request (each builds an SSL context, 40 ms of CPU)."""
    no_keepalive = httpx.Limits(max_keepalive_connections=0)
    return httpx.Client(base_url=server.url, timeout=BOUND_S, limits=no_keepalive)


def _on_new_connections(server: Server, method: str, path: str, n: int, **kw: Any) -> list[Any]:
    """``n`` requests, each on a connection of its own (so either process may take it)."""
    answers = []
    with _new_connections(server) as client:
        for _ in range(n):
            response = client.request(method, path, **kw)
            assert response.status_code == 200, response.text
            answers.append(response.json())
    return answers


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def _metrics_folder(pid: int) -> Path:
    """The shared metrics folder, from a server process's environment."""
    environ = (Path("/proc") / str(pid) / "environ").read_bytes().decode().split("\0")
    name = "PROMETHEUS_MULTIPROC_DIR="
    return Path(next(var.removeprefix(name) for var in environ if var.startswith(name)))


@pytest.mark.timeout(180)
def test_two_server_processes_share_port_jobs_and_metrics(servers: Callable[..., Server]) -> None:
    started = time.monotonic()
    server = servers(
        module=True,
        ENSEMBLE_WORKERS="2",
        ENSEMBLE_MAX_CONCURRENT_JOBS="1",
        ENSEMBLE_CANCEL_GRACE_S="1",
        ENSEMBLE_SHUTDOWN_TIMEOUT_S="10",
    )
    workers = server.server_processes()
    assert len(workers) == 2 and server.pid not in workers, workers
    folder = _metrics_folder(workers[0])
    assert folder.is_dir() and oct(folder.stat().st_mode & 0o777) == "0o700"

    # Upload, and train with ?wait=true: the accepting process answers when the job ends,
    # whichever process ran it.
    with httpx.Client(base_url=server.url, timeout=BOUND_S) as client:
        dataset = client.post("/v1/datasets", json=TABLE).json()["id"]
        trained = client.post("/v1/models/m/versions?wait=true", json=_forest(dataset, 20))
        assert trained.status_code == 201, trained.text

    # Many predictions, each on a new connection: both processes answer, the same.
    sent_ids = [uuid.uuid4().hex for _ in range(PREDICTIONS)]
    body = {"instances": ROWS, "options": {"return_proba": True}}
    answers = []
    with _new_connections(server) as client:
        for rid in sent_ids:
            response = client.post(
                "/v1/models/m/versions/latest/predict", json=body, headers={"X-Request-ID": rid}
            )
            assert response.status_code == 200, response.text
            answers.append(response.json())
    assert all(answer == answers[0] for answer in answers)
    assert len(answers[0]["predictions"]) == len(ROWS)
    by_pid = Counter(_served_by(server, rid) for rid in sent_ids)
    assert set(by_pid) == set(workers), by_pid

    # A slow job runs in one process; the service allows one at a time (a global limit),
    # so a job submitted through the other process waits queued.
    owner_client = httpx.Client(base_url=server.url, timeout=BOUND_S)
    slow = owner_client.post("/v1/models/slow/versions", json=_forest(dataset, 5000)).json()

    def running_somewhere() -> bool:
        job = owner_client.get(f"/v1/jobs/{slow['id']}").json()
        return bool(job["status"] == "running" and job["progress"]["done"] > 0)

    _until(running_somewhere, "the slow job to run")
    training = [
        w for w in workers for p in descendants(w) if "forkserver" in cmdline(p) and descendants(p)
    ]
    assert len(training) == 1, training
    runs_it = training[0]
    other = next(w for w in workers if w != runs_it)
    elsewhere = _connection_to(server, other)
    try:
        second = elsewhere.post("/v1/models/after/versions", json=_forest(dataset, 5)).json()
        for _ in range(5):
            assert elsewhere.get(f"/v1/jobs/{second['id']}").json()["status"] == "queued"
            time.sleep(0.1)
        # The status reads the same from both processes; the cancel goes to the other one.
        views = _on_new_connections(server, "GET", f"/v1/jobs/{slow['id']}", 12)
        assert {v["status"] for v in views} == {"running"}
        rid = uuid.uuid4().hex
        cancel = elsewhere.post(f"/v1/jobs/{slow['id']}/cancel", headers={"X-Request-ID": rid})
        assert cancel.status_code == 202 and cancel.json()["cancel_requested"], cancel.text
        assert _served_by(server, rid) == other
        _until(
            lambda: elsewhere.get(f"/v1/jobs/{slow['id']}").json()["status"] == "cancelled",
            "the cancelled job to end",
        )
        # The slot is free: the queued job starts (in either process) and succeeds.
        _until(
            lambda: elsewhere.get(f"/v1/jobs/{second['id']}").json()["status"] == "succeeded",
            "the queued job to run",
        )
    finally:
        elsewhere.close()
        owner_client.close()

    # /metrics merges both processes: every request line logged so far is counted once.
    # (A request is counted and logged just after its answer: let the last ones land.)
    logged = _requests(server)
    while True:
        time.sleep(0.3)
        latest = _requests(server)
        if len(latest) == len(logged):
            break
        logged = latest
    assert {int(e["pid"]) for e in logged.values()} == set(workers)
    with httpx.Client(base_url=server.url, timeout=BOUND_S) as client:
        text = client.get("/metrics").text
    requests = _samples(text, "ensemble_http_requests_total")
    assert sum(requests.values()) == len(logged), (sum(requests.values()), len(logged))
    predicted = (("method", "POST"), ("route", PREDICT), ("status", "200"))
    assert requests[predicted] == PREDICTIONS
    by_model = _samples(text, "ensemble_predictions_total")
    assert sum(v for k, v in by_model.items() if dict(k)["model"] == "m") == PREDICTIONS
    assert _samples(text, "ensemble_http_requests_in_progress") == {(): 1.0}
    jobs = _samples(text, "ensemble_training_jobs")
    assert jobs[(("status", "succeeded"),)] == 2 and jobs[(("status", "cancelled"),)] == 1
    # Each process loaded its own copy of the model.
    assert _samples(text, "ensemble_model_cache_loads_total") == {(): 2.0}
    hits = _samples(text, "ensemble_model_cache_hits_total")[()]
    assert hits + _samples(text, "ensemble_model_cache_misses_total")[()] >= PREDICTIONS
    rss = _samples(text, "process_resident_memory_bytes")
    assert {dict(labels)["pid"] for labels in rss} == {str(w) for w in workers}

    # SIGTERM to the launcher: every process of the group ends, exit status 0.
    group = in_group(server.pid)
    assert len(group) >= 5, group  # launcher, 2 servers, their fork servers (+ trackers)
    os.kill(server.pid, signal.SIGTERM)
    assert server.process is not None
    assert server.process.wait(BOUND_S) == 0, server.log()
    _until(lambda: not in_group(server.pid), "every process of the service to end")
    assert not any(alive(p) for p in group)
    assert not folder.exists()
    lines = server.log_path.read_text().splitlines()
    assert all(json.loads(line)["pid"] for line in lines if line.startswith("{"))
    elapsed = time.monotonic() - started
    print(f"\nENSEMBLE_WORKERS=2: predictions by process {dict(by_pid)}; {elapsed:.1f} s")


@pytest.mark.timeout(150)
def test_a_server_process_that_cannot_start_stops_the_service_with_status_3(
    tmp_path: Path,
) -> None:
    not_a_folder = tmp_path / "data"
    not_a_folder.write_text("a file where the data folder should be")
    log = tmp_path / "server.log"
    env = {
        **os.environ,
        "HOST": "127.0.0.1",
        "PORT": str(free_port()),
        "ENSEMBLE_DATA_DIR": str(not_a_folder),
        "ENSEMBLE_WORKERS": "2",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            assert process.wait(60) == 3, log.read_text()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    _until(lambda: not in_group(process.pid), "every process of the service to end")
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert lines[-1]["logger"] == "app.launcher" and "could not start" in lines[-1]["message"]


@pytest.mark.timeout(150)
def test_server_processes_stop_when_the_launcher_is_killed(
    servers: Callable[..., Server],
) -> None:
    server = servers(module=True, ENSEMBLE_WORKERS="2")
    workers = server.server_processes()
    assert len(workers) == 2
    folder = _metrics_folder(workers[0])
    # Killed at once: the second server process may still be starting.
    os.kill(server.pid, signal.SIGKILL)
    _until(lambda: not in_group(server.pid), "the server processes to stop")
    lines = server.log_path.read_text().splitlines()
    gone = [json.loads(line) for line in lines if "the launcher" in line]
    assert sorted(entry["pid"] for entry in gone) == sorted(workers)
    assert not folder.exists()  # the last of them removed it


@pytest.mark.timeout(180)
def test_a_killed_server_process_is_replaced_and_its_job_failed(
    servers: Callable[..., Server],
) -> None:
    server = servers(module=True, ENSEMBLE_WORKERS="2", ENSEMBLE_SHUTDOWN_TIMEOUT_S="10")
    workers = server.server_processes()
    with httpx.Client(base_url=server.url, timeout=BOUND_S) as client:
        dataset = client.post("/v1/datasets", json=TABLE).json()["id"]
        job = client.post("/v1/models/k/versions", json=_forest(dataset, 5000)).json()
        _until(
            lambda: client.get(f"/v1/jobs/{job['id']}").json()["progress"]["done"] > 0,
            "the job to make progress",
        )
    runs_it, trainer = next(
        (w, t)
        for w in workers
        for f in descendants(w)
        if "forkserver" in cmdline(f)
        for t in descendants(f)
    )
    os.kill(runs_it, signal.SIGKILL)
    # Its training worker sees it gone; uvicorn starts a replacement, whose registry
    # fails the jobs of the dead instance.
    _until(lambda: not alive(trainer), "the training worker to stop")
    _until(lambda: len(server.server_processes()) == 2, "a replacement server process")
    assert runs_it not in server.server_processes()
    with httpx.Client(base_url=server.url, timeout=BOUND_S) as client:
        _until(
            lambda: client.get(f"/v1/jobs/{job['id']}").json()["status"] == "failed",
            "the job of the dead process to fail",
        )
        assert client.get(f"/v1/jobs/{job['id']}").json()["error"]["code"] == "interrupted"
        text = client.get("/metrics").text
    # The dead process's counts stay; its requests in progress do not.
    submitted = (("method", "POST"), ("route", "/v1/models/{name}/versions"), ("status", "202"))
    assert _samples(text, "ensemble_http_requests_total")[submitted] == 1
    assert _samples(text, "ensemble_http_requests_in_progress") == {(): 1.0}
    assert server.stop() == 0, server.log()
    _until(lambda: not in_group(server.pid), "every process of the service to end")
