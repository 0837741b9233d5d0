"""SIGTERM to a real server with requests in flight and a job running.

The requests are made slow from the client side, so that they are deterministically in
flight: each sends half of its body, the server is sent SIGTERM, and the other half
follows only once new connections are seen refused. A ``?wait=true`` training request
waits on a job that is running. All of them must complete with their 2xx answer, the job
must end failed ("interrupted by shutdown"), the workers must be gone and the process
must exit 0 -- with JSON log lines throughout and no API key in them.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.server import Server, alive, cmdline, descendants

KEY = "e2e-admin-key-7f3a9c"
AUTH = {"Authorization": f"Bearer {KEY}"}
TABLE = {
    "columns": ["a", "b", "label"],
    "rows": [[i % 7 + 0.5, (i * 3) % 11 + 0.25, "xy"[i % 2]] for i in range(120)],
}
ROWS = [{"a": 1.5 + i % 5, "b": 2.25} for i in range(200)]
BOUND_S = 30.0  # every wait below is bounded by this


def _forest(dataset: str, n_estimators: int) -> dict[str, Any]:
    return {
        "dataset_id": dataset,
        "target": "label",
        "ensemble": {"kind": "random_forest", "params": {"n_estimators": n_estimators}},
        "random_state": 3,
    }


class SlowBody:
    """A request body sent in two halves: the second after ``go``, well after SIGTERM."""

    def __init__(self, payload: dict[str, Any], go: threading.Event) -> None:
        self.data = json.dumps(payload).encode()
        self.go = go
        self.first_half_sent = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        half = len(self.data) // 2
        yield self.data[:half]
        self.first_half_sent.set()  # httpx asks for the next chunk once it sent this one
        self.go.wait(BOUND_S)
        yield self.data[half:]


class InFlight(threading.Thread):
    """One request on its own connection; keeps its response and when it came."""

    def __init__(self, url: str, path: str, body: SlowBody | dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.url, self.path, self.body = url, path, body
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None
        self.done_at = 0.0

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.url, timeout=BOUND_S * 2, headers=AUTH) as client:
                if isinstance(self.body, SlowBody):
                    headers = {"Content-Type": "application/json"}
                    self.response = client.post(self.path, content=self.body, headers=headers)
                else:
                    self.response = client.post(self.path, json=self.body)
        except BaseException as exc:
            self.error = exc
        self.done_at = time.monotonic()


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _in_progress(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("ensemble_http_requests_in_progress "):
            return float(line.split()[1])
    return 0.0


def _refused(fresh: httpx.Client) -> bool:
    """A new connection is not served (refused, or reset if it got into the backlog);
    ``fresh`` keeps no connection alive, so each call opens one."""
    try:
        fresh.get("/healthz")
    except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
        return True
    return False


def _job_row(server: Server, job_id: str) -> tuple[str, dict[str, Any]]:
    uri = f"file:{server.data_dir / 'registry.db'}?mode=ro"
    with sqlite3.connect(uri, uri=True) as db:
        status, error = db.execute(
            "SELECT status, error FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
    return str(status), json.loads(error) if error else {}


@pytest.mark.timeout(120)
def test_sigterm_finishes_requests_in_flight_fails_the_job_and_exits_0(
    servers: Callable[..., Server],
) -> None:
    server = servers(ENSEMBLE_API_KEYS=f"{KEY}:admin", ENSEMBLE_SHUTDOWN_TIMEOUT_S="20")
    with httpx.Client(base_url=server.url, timeout=BOUND_S, headers=AUTH) as client:
        dataset = client.post("/v1/datasets", json=TABLE).json()["id"]
        small = client.post("/v1/models/m/versions?wait=true", json=_forest(dataset, 5))
        assert small.status_code == 201, small.text

        # A training request that waits (?wait=true) on a job that keeps running.
        waiting = "/v1/models/slow/versions?wait=true"
        training = InFlight(server.url, waiting, _forest(dataset, 5000))
        training.start()
        running: list[dict[str, Any]] = []

        def job_running() -> bool:
            running[:] = client.get("/v1/jobs", params={"status": "running"}).json()
            return bool(running) and running[0]["progress"]["done"] > 0

        _until(job_running, "the training job to run")
        job_id = running[0]["id"]

        # Two uploads and two predictions, each half sent.
        go = threading.Event()
        predict = "/v1/models/m/versions/1/predict"
        slow = [
            InFlight(server.url, "/v1/datasets", SlowBody({**TABLE, "name": f"t{i}"}, go))
            for i in range(2)
        ] + [InFlight(server.url, predict, SlowBody({"instances": ROWS}, go)) for _ in range(2)]
        for request in slow:
            request.start()
        for request in slow:
            assert isinstance(request.body, SlowBody)
            assert request.body.first_half_sent.wait(BOUND_S)
        # The server has them all (and this scrape): 4 slow + 1 waiting + 1.
        _until(lambda: _in_progress(client) >= 6, "the server to hold every request")

    forkserver = [p for p in descendants(server.pid) if "forkserver" in cmdline(p)]
    workers = [w for p in forkserver for w in descendants(p)]
    assert len(workers) == 1, workers

    no_keepalive = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(base_url=server.url, timeout=5, limits=no_keepalive) as fresh:
        sent = time.monotonic()
        os.kill(server.pid, signal.SIGTERM)
        _until(lambda: _refused(fresh), "new connections to be refused")
    refused_after = time.monotonic() - sent
    time.sleep(1.0)  # the server waits for the rest of the bodies, however slow
    assert all(r.response is None and r.error is None for r in slow), "answered too early"
    assert server.process is not None and server.process.poll() is None
    go.set()

    for request in [training, *slow]:
        request.join(BOUND_S)
        assert request.error is None, f"{request.path}: {request.error!r}"
        assert request.response is not None, request.path
    statuses = [r.response.status_code for r in slow if r.response is not None]
    assert statuses == [201, 201, 200, 200], [r.response.text for r in slow if r.response]
    for predicted in slow[2:]:
        assert predicted.response is not None
        assert len(predicted.response.json()["predictions"]) == len(ROWS)
    assert training.response is not None and training.response.status_code == 202
    assert training.response.json()["status"] == "running"

    exit_code = server.process.wait(BOUND_S)
    exited_after = time.monotonic() - sent
    assert exit_code == 0, server.log()
    assert not any(alive(p) for p in workers), "the training worker outlived the server"
    # The fork server leaves on its own when it sees the server gone.
    _until(lambda: not any(alive(p) for p in forkserver), "the fork server to leave")

    status, error = _job_row(server, job_id)
    assert status == "failed"
    assert error["code"] == "interrupted"
    assert error["detail"].startswith("interrupted by shutdown"), error

    log = server.log_path.read_text()
    # Every line is JSON, but what Python's own machinery prints to the shared stderr from
    # processes of its own (multiprocessing's resource tracker, warnings at exit).
    foreign = [line for line in log.splitlines() if not line.startswith("{")]
    assert all("resource_tracker" in line or "warnings.warn" in line for line in foreign), foreign
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert KEY not in log
    requests = [e for e in lines if e.get("event") == "request"]
    answered = {(e["route"], e["status"]) for e in requests}
    assert ("/v1/datasets", 201) in answered
    assert ("/v1/models/{name}/versions/{ref}/predict", 200) in answered
    assert ("/v1/models/{name}/versions", 202) in answered
    assert all(len(e["request_id"]) == 32 for e in requests)
    job_events = [e["status"] for e in lines if e.get("job_id") == job_id]
    assert job_events == ["queued", "running", "failed"], job_events
    slowest = max(r.done_at for r in [training, *slow]) - sent
    print(
        f"\nSIGTERM: new connections refused after {refused_after:.2f} s; the bodies' second "
        f"halves sent 1 s later; last answer after {slowest:.2f} s; exit 0 after "
        f"{exited_after:.2f} s"
    )
