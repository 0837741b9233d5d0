"""The quick starts, run as written against `make run`: the README's (the `ensemble`
command and the Python client) and docs/quick-start-http.md's (curl)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.server import ROOT, Server

README = ROOT / "README.md"
HTTP_PAGE = ROOT / "docs" / "quick-start-http.md"
DEFAULT_ADDRESS = "127.0.0.1:8000"


def _section(page: Path, title: str) -> str:
    text = page.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def _reader(tmp_path: Path, server: Server) -> tuple[Path, dict[str, str]]:
    """A scratch folder with the repository's `.venv`, and the reader's environment: the
    server's address in ENSEMBLE_URL, as the README tells a reader with another PORT.

    Until the project is installed again with the `ensemble` console script, a stand-in
    runs the same module; PYTHONPATH makes the client importable from this checkout."""
    work = tmp_path / "user"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    script = stand_in / "ensemble"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ensemble_client "$@"\n')
    script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT", "VIRTUAL_ENV")}
    env["PATH"] = f"{stand_in}:{env['PATH']}"
    env["PYTHONPATH"] = str(ROOT)
    env["ENSEMBLE_URL"] = server.url
    return work, env


def _run(command: list[str], work: Path, env: dict[str, str], server: Server) -> str:
    result = subprocess.run(
        command, check=False, cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{server.log()}"
    return result.stdout


def test_readme_quick_start_runs_as_written(servers: Callable[..., Server], tmp_path: Path) -> None:
    section = _section(README, "Quick start")
    assert [b.strip() for b in _blocks(section, "console")] == ["make run"]
    (shell,) = _blocks(section, "sh")
    (python,) = _blocks(section, "python")
    commands = [line for line in shell.splitlines() if line.startswith("ensemble ")]
    assert [c.split()[1] for c in commands] == ["datasets", "train", "predict"]  # three
    assert len(python.strip().splitlines()) == 5
    started = time.monotonic()
    server = servers(make_run=True)
    work, env = _reader(tmp_path, server)
    out = _run(["bash", "-euo", "pipefail", "-c", shell], work, env, server)
    assert "iris-rf v1: random_forest, classification" in out  # the trained version
    predictions = re.findall(r"│ (setosa|versicolor|virginica) +│", out)
    assert predictions == ["setosa", "versicolor", "virginica"], out
    printed = _run([str(work / ".venv" / "bin" / "python"), "-c", python], work, env, server)
    accuracy, *frame = printed.splitlines()
    assert 0.8 <= float(accuracy.split()[0]) <= 1.0
    assert "prediction" in accuracy and "proba_setosa" in accuracy
    assert [line.split()[1] for line in frame if line[:1].isdigit()] == [
        "setosa", "versicolor", "virginica"
    ]  # fmt: skip
    assert server.stop() == 0  # SIGTERM: a clean shutdown, and make run exits 0 too
    print(f"\nREADME quick start: {time.monotonic() - started:.1f} s")


def test_http_quick_start_runs_as_written(servers: Callable[..., Server], tmp_path: Path) -> None:
    script = "\n".join(_blocks(HTTP_PAGE.read_text(), "sh"))
    # The reader's BASE is the default address, written out; here the server has a free
    # port, put in its place as the page tells a reader with another PORT to do.
    assert script.count(DEFAULT_ADDRESS) == 1, "BASE names the address once"
    started = time.monotonic()
    server = servers(make_run=True)
    started_in = time.monotonic() - started
    script = script.replace(DEFAULT_ADDRESS, f"127.0.0.1:{server.port}")
    work, env = _reader(tmp_path, server)
    out = _run(["bash", "-euo", "pipefail", "-c", script], work, env, server)
    elapsed = time.monotonic() - started
    assert sorted(p.name for p in work.iterdir()) == [".venv"]  # iris.csv went to a temp folder
    lines = out.strip().splitlines()
    job, predictions, oob, stack = (json.loads(line) for line in lines)  # JSON, every line
    assert job["status"] == "succeeded"
    assert predictions["predictions"] == ["setosa", "virginica"]
    assert len(predictions["probabilities"]) == 2
    assert '"n_scored": 120' in lines[2] and oob["n_scored"] == 120  # 30 of 150 held out
    assert '"kind": "stacking"' in lines[3]
    assert stack["model"] == "iris-stack" and stack["version"] == 1
    assert set(stack["members"]) == {"bag", "lr"}
    assert server.stop() == 0
    print(f"\nHTTP quick start: {started_in:.1f} s to start, {elapsed:.1f} s in all")
