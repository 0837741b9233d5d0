"""The CLI in a real terminal (tmux): the training progress bar renders live, and Ctrl-C
asks whether to cancel the job, then cancels it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sklearn.datasets import load_digits

from ensemble_client import Client
from tests.e2e.server import ROOT, Server


def _tmux() -> str:
    """tmux, installed by scripts/test_deps.sh when missing and we are root."""
    found = shutil.which("tmux")
    if found is None and os.geteuid() == 0:
        subprocess.run(["bash", str(ROOT / "scripts" / "test_deps.sh")], check=True)
        found = shutil.which("tmux")
    if found is None:
        pytest.skip("tmux is not installed (scripts/test_deps.sh installs it as root)")
    return found


@pytest.fixture
def terminal() -> Iterator[Callable[..., str]]:
    """Run commands in a detached tmux session on a socket of this test's own."""
    tmux = _tmux()
    socket = f"ensemble-test-{uuid.uuid4().hex[:8]}"

    def run(*args: str) -> str:
        done = subprocess.run([tmux, "-L", socket, *args], capture_output=True, text=True,
                              check=True, timeout=30)  # fmt: skip
        return done.stdout

    yield run
    subprocess.run([tmux, "-L", socket, "kill-server"], capture_output=True, check=False)


def wait_for(screen: Callable[[], str], pattern: str, timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = screen()
        if re.search(pattern, text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} never appeared on the terminal:\n{text}")


def trees(screen: str) -> int:
    found = re.search(r"(\d+)/5000", screen)
    assert found is not None, screen
    return int(found.group(1))


def test_progress_bar_and_ctrl_c_in_a_terminal(
    servers: Callable[..., Server], terminal: Callable[..., str], tmp_path: Path
) -> None:
    server = servers()
    digits = load_digits(as_frame=True).frame  # 1,797 rows: 5,000 trees take a while
    with Client(server.url) as client:
        client.datasets.upload(digits, name="digits")
    command = " ".join(
        shlex.quote(part)
        for part in [sys.executable, "-m", "ensemble_client", "train", "digits-rf",
                     "--dataset", "digits", "--target", "target", "--kind", "random_forest",
                     "--param", "n_estimators=5000", "--wait"]
    )  # fmt: skip
    script = tmp_path / "run.sh"
    script.write_text(
        f"cd {shlex.quote(str(ROOT))}\nexport ENSEMBLE_URL={server.url} PYTHONPATH=.\n"
        f"{command}\necho EXIT=$?\nsleep 600\n"
    )
    terminal("new-session", "-d", "-s", "cli", "-x", "160", "-y", "30", f"bash {script}")

    def screen() -> str:
        return terminal("capture-pane", "-p", "-t", "cli")

    # The bar: model, version and stage, trees done of 5,000, elapsed time and ETA.
    live = wait_for(screen, r"digits-rf v1 fitting .*━.* \d+/5000 .*\d:\d\d:\d\d ETA")
    assert trees(wait_for(screen, r"\d+/5000")) >= trees(live)  # it moves on, never back
    terminal("send-keys", "-t", "cli", "C-c")
    wait_for(screen, r"Cancel job job_\w+ \(digits-rf v1\)\? \[Y/n\]")
    terminal("send-keys", "-t", "cli", "y", "Enter")
    ended = wait_for(screen, r"EXIT=\d+")
    assert "EXIT=130" in ended and "no version was made" in ended, ended
    assert "Traceback" not in ended
    with Client(server.url) as client:
        (job,) = client.jobs.list(model="digits-rf")
        assert job.status == "cancelled"
