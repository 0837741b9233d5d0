"""``python -m app`` with an object store it cannot use: exit status 2 naming the setting,
before any server process starts (not a 500 at the first upload); and a working one,
served by a real uvicorn process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.server import ROOT, Server, cmdline, in_group
from tests.network import free_port
from tests.s3server import S3Server

STARTUP_BOUND_S = 60.0


def _python_m_app(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m app`` in a session of its own until it exits; its output.

    Once it has exited, no process of that session may be left: the training fork server
    it started beside its checks (when it would serve in that process) stops with it, even
    in the middle of its preload. Output goes to files, so the wait is for the launcher
    alone (a pipe would also wait for any process it left holding the pipe)."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"],
            cwd=ROOT,
            env={
                **os.environ,
                "ENSEMBLE_DATA_DIR": str(tmp_path / "data"),
                "PORT": str(free_port()),
                **env,
            },
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            returncode = process.wait(STARTUP_BOUND_S)
            left = [cmdline(pid) for pid in in_group(process.pid)]
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    assert not [c for c in left if "forkserver" in c], left
    return subprocess.CompletedProcess(
        process.args, returncode, out.read_text(), err.read_text(errors="replace")
    )


def test_a_missing_bucket_exits_2_naming_the_setting(tmp_path: Path, s3_server: S3Server) -> None:
    result = _python_m_app(
        tmp_path,
        ENSEMBLE_OBJECT_STORE="s3://no-such-bucket/models",
        ENSEMBLE_S3_ENDPOINT_URL=s3_server.endpoint,
    )
    assert result.returncode == 2, result.stderr
    assert "ENSEMBLE_OBJECT_STORE=s3://no-such-bucket/models" in result.stderr
    assert "bucket 'no-such-bucket' does not exist" in result.stderr
    assert "Traceback" not in result.stderr and "testing" not in result.stderr  # no secret


def test_an_unreachable_endpoint_exits_2_naming_both_settings(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = _python_m_app(
        tmp_path, ENSEMBLE_OBJECT_STORE="s3://some-bucket", ENSEMBLE_S3_ENDPOINT_URL=endpoint
    )
    assert result.returncode == 2, result.stderr
    assert f"ENSEMBLE_OBJECT_STORE=s3://some-bucket (ENSEMBLE_S3_ENDPOINT_URL={endpoint})" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("value", "says"),
    [("gs://bucket/x", "a local folder or s3://"), ("s3://Bad_Bucket", "not a valid bucket name")],
)
def test_a_malformed_object_store_exits_2(tmp_path: Path, value: str, says: str) -> None:
    result = _python_m_app(tmp_path, ENSEMBLE_OBJECT_STORE=value)
    assert result.returncode == 2
    assert "invalid setting ENSEMBLE_OBJECT_STORE" in result.stderr and says in result.stderr


def test_a_server_process_trains_and_serves_from_the_bucket(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    server = Server(
        tmp_path / "data",
        tmp_path / "server.log",
        module=True,
        ENSEMBLE_OBJECT_STORE=f"s3://{s3_bucket}/e2e",
        ENSEMBLE_S3_ENDPOINT_URL=s3_server.endpoint,
    ).start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            upload = client.post(
                "/v1/datasets",
                json={"name": "t", "columns": ["x", "y"], "rows": [[i, i % 2] for i in range(40)]},
            )
            assert upload.status_code == 201, upload.text
            body = {
                "dataset_id": upload.json()["id"],
                "target": "y",
                "ensemble": {"kind": "random_forest", "params": {"n_estimators": 3}},
            }
            trained = client.post("/v1/models/m/versions?wait=true", json=body)
            assert trained.status_code == 201, trained.text
            predicted = client.post(
                "/v1/models/m/versions/1/predict", json={"instances": [{"x": 3}]}
            )
            assert predicted.status_code == 200, predicted.text
            assert client.get("/readyz").status_code == 200
        listing = s3_server.client().list_objects_v2(Bucket=s3_bucket, Prefix="e2e/")
        assert len([o for o in listing["Contents"] if o["Key"].endswith(".joblib")]) == 1
    finally:
        assert server.stop() == 0, server.log()
