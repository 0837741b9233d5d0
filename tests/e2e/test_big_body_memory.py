"""A real server answering big JSON bodies one after another keeps their buffers mapped:
glibc's default thresholds unmapped and re-faulted some 17 MB per 10,000-row request
(4,400 page faults, half the time of its parse; app/server/memory.py)."""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from app.server.memory import keep_big_buffers_mapped
from tests.e2e.server import Server

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc"
)
ROWS = 10_000
REQUESTS = 10
# glibc's own thresholds adapt to a freed mmapped buffer's size, so from the third 10,000-row
# request on they keep its buffers mapped too (both servers fault ~0 times alone). What is
# left of the module's effect is the second request: ~180 faults with it, ~3,500 without.
# Faults from elsewhere add the same to every request of both servers (5,786 a request in a
# full CI run, 6,870 in one here; cause not found), so each request is measured above its
# server's floor, the fewest faults of its warm requests, and the two servers take turns.
AT_MOST_OF_GLIBCS_OWN = 0.25
# A server that keeps its buffers mapped faults at most this many times above its floor
# (about 150-200 where app/server/memory.py was made); one that re-maps them, thousands.
KEPT_MAPPED_FAULTS = 1_000
GLIBCS_OWN = {"GLIBC_TUNABLES": "glibc.malloc.check=0"}  # glibc's default, an operator's


def minor_faults(pid: int) -> int:
    """The process's minor page faults so far (/proc/PID/stat, field 10)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7])


def faults_per_request(servers: list[Server], body: bytes, version: int) -> list[list[int]]:
    """Each server's minor faults per request, the servers taking turns request by request."""
    faults: list[list[int]] = [[] for _ in servers]
    clients = [server.client() for server in servers]
    try:
        for _ in range(REQUESTS):
            for server, client, counted in zip(servers, clients, faults, strict=True):
                assert server.process is not None
                before = minor_faults(server.process.pid)
                answer = client.post(
                    f"/v1/models/bc/versions/{version}/predict",
                    content=body,
                    headers={"content-type": "application/json"},
                )
                assert answer.status_code == 200, answer.text[:300]
                assert len(answer.json()["predictions"]) == ROWS
                counted.append(minor_faults(server.process.pid) - before)
    finally:
        for client in clients:
            client.close()
    return faults


def second_above_floor(faults: list[int]) -> int:
    """The second request's faults above the server's floor, the fewest of the requests
    from the third on (the first fills the heap; by the third glibc's own have adapted)."""
    return faults[1] - min(faults[2:])


def test_big_json_bodies_do_not_fault_their_buffers_in_afresh(
    servers: Callable[..., Server],
) -> None:
    frame = load_breast_cancer(as_frame=True).frame
    features = [c for c in frame.columns if c != "target"]
    rows = frame[features].to_numpy()[np.arange(ROWS) % len(frame)].tolist()
    body = json.dumps({"instances": {"columns": features, "data": rows}}).encode()
    ours = servers()
    with ours.client() as client:
        dataset = client.post(
            "/v1/datasets",
            json={"name": "bc", "columns": list(frame.columns), "rows": frame.values.tolist()},
        ).json()["id"]
        trained = client.post(
            "/v1/models/bc/versions?wait=true",
            json={
                "dataset_id": dataset,
                "target": "target",
                "task": "classification",
                "ensemble": {"kind": "gradient_boosting", "params": {"n_estimators": 5}},
                "evaluation": {"holdout_fraction": 0.0, "cv_folds": 0},
            },
        )
        assert trained.status_code == 201, trained.text[:300]
    glibcs = servers(**GLIBCS_OWN)  # the same data folder: the same version
    with_ours, with_glibcs = faults_per_request([ours, glibcs], body, 1)
    bound = max(AT_MOST_OF_GLIBCS_OWN * second_above_floor(with_glibcs), KEPT_MAPPED_FAULTS)
    assert second_above_floor(with_ours) <= bound, (with_ours, with_glibcs)
    # warm, no worse than glibc's own
    assert min(with_ours[2:]) <= min(with_glibcs[2:]) + KEPT_MAPPED_FAULTS, (
        with_ours,
        with_glibcs,
    )


@pytest.mark.parametrize(
    "variable", ["MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"]
)
def test_an_operator_s_own_malloc_settings_are_left_alone(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = "glibc.malloc.trim_threshold=1000000" if variable == "GLIBC_TUNABLES" else "1000000"
    monkeypatch.setenv(variable, value)
    assert keep_big_buffers_mapped() is False
