"""The training bench waits for a version without loading the machine it times.

``benchmarks/train_scale.py`` asked for the version and the job every 50 ms while the
service trained: on the 2-core machine the server and the bench then took CPU from the
fit they timed (issue 24 item 5, ``benchmarks/forest_worker_gap.py``).  It now submits
with ``?wait=true`` and sends nothing while the job trains; a wait that ends first (202)
is followed at the client's pace.  A fake service counts the requests.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import train_scale

JOB = {"id": "job_1", "version": 1, "status": "queued"}
VERSION = {"version": 1, "training": {"duration_s": 12.5}}


class FakeService:
    """A job that trains for ``polls`` reads of its state; ``wait`` answers 201 at once,
    or 202 (its timeout) when ``wait_times_out``."""

    def __init__(self, polls: int, wait_times_out: bool = False) -> None:
        self.left, self.wait_times_out = polls, wait_times_out
        self.requests: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(f"{request.method} {request.url.path}?{request.url.query.decode()}")
        path = request.url.path
        if request.method == "POST":
            json.loads(request.content)
            if request.url.params.get("wait") == "true" and not self.wait_times_out:
                return httpx.Response(201, json=VERSION)
            return httpx.Response(202, json={**JOB, "status": "running"})
        if path == "/v1/jobs/job_1":
            self.left -= 1
            status = "running" if self.left > 0 else "succeeded"
            return httpx.Response(200, json={**JOB, "status": status, "error": None})
        if path == "/v1/models/scale/versions/1":
            return httpx.Response(200 if self.left <= 0 else 404, json=VERSION)
        return httpx.Response(404, json={})


def _client(service: FakeService) -> httpx.Client:
    return httpx.Client(base_url="http://bench", transport=httpx.MockTransport(service))


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train_scale.time, "sleep", lambda _s: None)


def test_one_request_while_the_service_trains() -> None:
    service = FakeService(polls=50)
    with _client(service) as client:
        wall, train_s = train_scale._train(client, {"dataset_id": "d"})
    assert service.requests == ["POST /v1/models/scale/versions?wait=true"]
    assert train_s == 12.5
    assert wall >= 0


def test_a_wait_that_ends_first_follows_the_job_then_reads_the_version() -> None:
    service = FakeService(polls=3, wait_times_out=True)
    with _client(service) as client:
        _, version = train_scale.train_and_wait(client, "scale", {"dataset_id": "d"})
    assert version == VERSION
    assert service.requests == [
        "POST /v1/models/scale/versions?wait=true",
        *["GET /v1/jobs/job_1?"] * 3,
        "GET /v1/models/scale/versions/1?",
    ]


def test_a_failed_job_is_an_error() -> None:
    def failed(request: httpx.Request) -> httpx.Response:
        return httpx.Response(422, json={"code": "invalid_spec", "detail": "no"})

    with (
        httpx.Client(base_url="http://bench", transport=httpx.MockTransport(failed)) as client,
        pytest.raises(RuntimeError, match="422"),
    ):
        train_scale.train_and_wait(client, "scale", {"dataset_id": "d"})
