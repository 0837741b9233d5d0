"""A real S3 API server for the tests: ``moto[server]`` in a subprocess on 127.0.0.1.

Not a mock inside the test process: the service talks HTTP to another process, through
boto3, exactly as it would to AWS, MinIO or Ceph. :class:`S3Server` starts one on a free
port and stops it; ``tests/conftest.py`` shares one per test session (each test gets its
own fresh bucket) and sets throw-away credentials for every process the tests start.
End-to-end tests (two uvicorn processes) pass :attr:`S3Server.endpoint` and a bucket URL
to their servers as ``ENSEMBLE_S3_ENDPOINT_URL`` and ``ENSEMBLE_OBJECT_STORE``.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Final

from tests.network import free_port

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

START_TIMEOUT_S: Final = 30.0
TEST_CREDENTIALS: Final = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
_IGNORED: Final = ("AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE")


def use_test_credentials() -> None:
    """Throw-away credentials in this process's environment (inherited by every child:
    training workers, uvicorn servers), so no test ever signs with real ones."""
    os.environ.update(TEST_CREDENTIALS)
    for name in _IGNORED:
        os.environ.pop(name, None)


class S3Server:
    """One ``moto_server`` process; ``endpoint`` is its URL while it runs."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._log_path = log_dir / f"moto-{self.port}.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> S3Server:
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_path, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **TEST_CREDENTIALS},
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"moto_server exited: {self._log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
                    return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto_server did not answer within {START_TIMEOUT_S} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def client(self) -> S3Client:
        import boto3

        return boto3.session.Session(**_session_credentials()).client(
            "s3", endpoint_url=self.endpoint
        )

    def new_bucket(self) -> str:
        """A fresh, empty bucket; its name."""
        name = f"test-{secrets.token_hex(6)}"
        self.client().create_bucket(Bucket=name)
        return name

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def _session_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": TEST_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": TEST_CREDENTIALS["AWS_DEFAULT_REGION"],
    }
