"""The README's quick start, run as written against `make run`."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from app.settings import Settings
from tests.e2e.server import ROOT, Server

README = ROOT / "README.md"


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
    started = time.monotonic()
    server = servers(make_run=True)
    started_in = time.monotonic() - started
    work = tmp_path / "user"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        check=False,
        cwd=work,
        env={**os.environ, "PORT": str(server.port)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{server.log()}"
    out = result.stdout
    assert '"status":"succeeded"' in out
    assert '"predictions":["setosa","virginica"]' in out
    assert '"probabilities":[[' in out
    oob = out.strip().splitlines()[-1]
    assert oob.startswith("{'accuracy': ") and "'n_scored': 120" in oob  # 30 held out
    assert server.stop() == 0  # SIGTERM: a clean shutdown, and make run exits 0 too
    print(f"\nquick start: {started_in:.1f} s to start, {elapsed:.1f} s in all")


def test_readme_lists_every_setting() -> None:
    table = _section("Settings")
    for name in Settings.model_fields:
        assert f"`ENSEMBLE_{name.upper()}`" in table, name
