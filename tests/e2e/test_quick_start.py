"""The README's quick start, run as written against `make run`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.server import ROOT, Server

README = ROOT / "README.md"
DEFAULT_ADDRESS = "127.0.0.1:8000"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def test_readme_quick_start_runs_as_written(servers: Callable[..., Server], tmp_path: Path) -> None:
    section = _section("Quick start")
    assert [b.strip() for b in _blocks(section, "console")] == ["make run"]
    script = "\n".join(_blocks(section, "sh"))
    # The reader's BASE is the default address, written out; here the server has a free
    # port, put in its place as the README tells a reader with another PORT to do.
    assert script.count(DEFAULT_ADDRESS) == 1, "BASE names the address once"
    started = time.monotonic()
    server = servers(make_run=True)
    started_in = time.monotonic() - started
    script = script.replace(DEFAULT_ADDRESS, f"127.0.0.1:{server.port}")
    work = tmp_path / "user"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    # Nothing from the server's terminal: no HOST or PORT in the reader's environment.
    env = {k: v for k, v in os.environ.items() if k not in ("HOST", "PORT")}
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        check=False,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{server.log()}"
    assert sorted(p.name for p in work.iterdir()) == [".venv"]  # iris.csv went to a temp folder
    lines = result.stdout.strip().splitlines()
    job, predictions, oob, stack = (json.loads(line) for line in lines)  # JSON, every line
    assert job["status"] == "succeeded"
    assert predictions["predictions"] == ["setosa", "virginica"]
    assert len(predictions["probabilities"]) == 2
    assert '"n_scored": 120' in lines[2] and oob["n_scored"] == 120  # 30 of 150 held out
    assert '"kind": "stacking"' in lines[3]
    assert stack["model"] == "iris-stack" and stack["version"] == 1
    assert set(stack["members"]) == {"bag", "lr"}
    assert server.stop() == 0  # SIGTERM: a clean shutdown, and make run exits 0 too
    print(f"\nquick start: {started_in:.1f} s to start, {elapsed:.1f} s in all")
