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
REQUESTS = 6
MAX_FAULTS_PER_REQUEST = 1_000  # 4,400 with glibc's default thresholds; about 150 with ours


def minor_faults(pid: int) -> int:
    """The process's minor page faults so far (/proc/PID/stat, field 10)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7])


def test_big_json_bodies_do_not_fault_their_buffers_in_afresh(
    servers: Callable[..., Server],
) -> None:
    server = servers()
    frame = load_breast_cancer(as_frame=True).frame
    features = [c for c in frame.columns if c != "target"]
    rows = frame[features].to_numpy()[np.arange(ROWS) % len(frame)].tolist()
    body = json.dumps({"instances": {"columns": features, "data": rows}}).encode()
    with server.client() as client:
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
        faults = []
        assert server.process is not None
        for _ in range(REQUESTS):
            before = minor_faults(server.process.pid)
            answer = client.post(
                "/v1/models/bc/versions/1/predict",
                content=body,
                headers={"content-type": "application/json"},
            )
            assert answer.status_code == 200, answer.text[:300]
            assert len(answer.json()["predictions"]) == ROWS
            faults.append(minor_faults(server.process.pid) - before)
    assert sorted(faults[2:])[1] < MAX_FAULTS_PER_REQUEST, faults  # warm requests


@pytest.mark.parametrize(
    "variable", ["MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"]
)
def test_an_operator_s_own_malloc_settings_are_left_alone(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = "glibc.malloc.trim_threshold=1000000" if variable == "GLIBC_TUNABLES" else "1000000"
    monkeypatch.setenv(variable, value)
    assert keep_big_buffers_mapped() is False
