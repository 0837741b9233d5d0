"""``python -m app`` with a registry database it cannot reach: exit status 2 at once,
one line naming ENSEMBLE_DATABASE_URL, the password never printed, nothing served."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.server import ROOT
from tests.network import free_port
from tests.postgres import PostgresServer

SECRET = "s3cret-Pa55"


def _start(tmp_path: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOST": "127.0.0.1",
        "PORT": str(free_port()),
        "ENSEMBLE_DATA_DIR": str(tmp_path / "data"),
        "ENSEMBLE_DATABASE_URL": url,
    }
    return subprocess.run(
        [sys.executable, "-m", "app"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a guard: the connect timeout is seconds
        check=False,
    )


def _assert_refused_naming_the_setting(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "ENSEMBLE_DATABASE_URL" in lines[0]
    assert SECRET not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    return lines[0]


def test_a_stopped_postgres_server_is_refused_at_start(tmp_path: Path) -> None:
    server = PostgresServer().start()
    try:
        server.stop()  # its port is closed now
        url = f"postgresql+psycopg://ensemble:{SECRET}@127.0.0.1:{server.port}/postgres"
        line = _assert_refused_naming_the_setting(_start(tmp_path, url))
        assert f"ensemble:***@127.0.0.1:{server.port}" in line
        assert "Connection refused" in line
    finally:
        server.remove()


def test_a_missing_database_on_a_live_server_is_refused_at_start(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = postgres_server.url("no_such_database").replace("ensemble@", f"ensemble:{SECRET}@")
    line = _assert_refused_naming_the_setting(_start(tmp_path, url))
    assert "no_such_database" in line and "does not exist" in line


def test_an_unparsable_url_is_refused_without_echoing_it(tmp_path: Path) -> None:
    line = _assert_refused_naming_the_setting(_start(tmp_path, f"postgres ql://u:{SECRET}@@"))
    assert "not a database URL" in line
