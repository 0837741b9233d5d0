"""A real service process on a free loopback port, with its own data folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

from tests.network import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0

# The training fork server starts with a server's first job, not at its start: many servers
# here serve, restart or fail and never train, and its preload (the library imported once
# more, ~5 s of CPU on the test machine) doubled what such a start cost; one that trains
# pays it as before, at its first job. A test may pass ENSEMBLE_PRELOAD_TRAINING="true";
# ``make run`` (the README's quick start, as a user runs it) keeps the service's defaults.
DEFAULTS = {"ENSEMBLE_PRELOAD_TRAINING": "false"}


class Server:
    """``uvicorn app.main:create_app --factory`` (or ``make run``, or ``python -m app``)
    in a new session."""

    def __init__(
        self, data_dir: Path, log: Path, *, make: bool = False, module: bool = False, **env: str
    ) -> None:
        self.data_dir = data_dir
        self.log_path = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.make = make
        self.module = module
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> Server:
        env = {
            **os.environ,
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "ENSEMBLE_DATA_DIR": str(self.data_dir),
            **({} if self.make else DEFAULTS),
            **self.env,
        }
        if self.make:
            command = ["make", "--no-print-directory", "run"]
        elif self.module:
            command = [sys.executable, "-m", "app"]
        else:
            command = [
                sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory",
                "--host", "127.0.0.1", "--port", str(self.port),
                "--timeout-graceful-shutdown", env.get("ENSEMBLE_SHUTDOWN_TIMEOUT_S", "30"),
            ]  # fmt: skip
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Poll /readyz with one client: ``httpx.get`` builds a client (its SSL context)
        per call, 40 ms of CPU each, taken from the starting server every 0.1 s."""
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.process is not None
        with httpx.Client(base_url=self.url, timeout=1) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the server exited early:\n{self.log()}")
                try:
                    if client.get("/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        raise RuntimeError(f"the server did not become ready:\n{self.log()}")

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)

    @property
    def pid(self) -> int:
        """The server process (under make: its child ``python -m app``)."""
        assert self.process is not None
        if not self.make:
            return self.process.pid
        return next(p for p in descendants(self.process.pid) if _is_server(cmdline(p)))

    def server_processes(self) -> list[int]:
        """The processes serving requests: this one, or the N that ``python -m app``
        started when ENSEMBLE_WORKERS > 1 (uvicorn's spawned children)."""
        children = [p for p in descendants(self.pid) if "spawn_main" in cmdline(p)]
        return [p for p in children if _parent(p) == self.pid] or [self.pid]

    def stop(self) -> int | None:
        """Graceful: SIGTERM to uvicorn (it runs the app's shutdown; make then exits).

        The exit status of the process started (uvicorn, or make), None if never started.
        """
        if self.process is None:
            return None
        if self.process.poll() is not None:
            self._close_log()
            return self.process.returncode
        try:
            os.kill(self.pid, signal.SIGTERM)
        except (StopIteration, ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self._close_log()
        return self.process.returncode

    def kill_server_only(self) -> None:
        """SIGKILL the server process alone; its workers must notice and go."""
        os.kill(self.pid, signal.SIGKILL)
        assert self.process is not None
        if not self.make:
            self.process.wait(timeout=10)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]


def _is_server(command: str) -> bool:
    words = command.split(" ")
    return "python" in words[0] and ("uvicorn" in words or words[1:3] == ["-m", "app"])


def _parent(pid: int) -> int | None:
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def in_group(pgid: int) -> list[int]:
    """The live processes of a process group (a server started in its own session)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def descendants(pid: int) -> list[int]:
    tree = _children()
    found: list[int] = []
    stack = list(tree.get(pid, []))
    while stack:
        child = stack.pop()
        found.append(child)
        stack.extend(tree.get(child, []))
    return found


def cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
