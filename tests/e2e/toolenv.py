"""Virtualenvs of their own for third-party tools that cannot share the project's.

The KServe SDK pins ``pandas<3`` (the project runs pandas 3), so installing it beside the
project would downgrade pandas for everything else.  :func:`tool_python` builds
``.venv-<name>`` at the repository root from ``tests/e2e/<name>-requirements.txt`` with
that virtualenv's own pip, once (a stamp records the requirements it was built from; a
changed file rebuilds it), under a lock, and returns its interpreter.  ``make clean``
removes it.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 540


def tool_python(name: str) -> Path:
    """The interpreter of ``.venv-<name>``, built first if missing or out of date."""
    requirements = ROOT / "tests" / "e2e" / f"{name}-requirements.txt"
    venv = ROOT / f".venv-{name}"
    stamp = venv / ".installed"
    wanted = hashlib.sha256(requirements.read_bytes()).hexdigest()
    python = venv / "bin" / "python"
    with (ROOT / f".venv-{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted and python.exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(python), "-m", "pip", "install", "--quiet", "-r", str(requirements)])
        stamp.write_text(wanted)
    return python


def _run(command: list[str]) -> None:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
