"""End-to-end fixtures: real servers on free loopback ports, stopped after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.server import Server


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """A factory of servers sharing the test's data folder (restarts use the same one)."""
    started: list[Server] = []

    def make(make_run: bool = False, module: bool = False, **env: str) -> Server:
        log = tmp_path / f"server-{len(started)}.log"
        server = Server(tmp_path / "data", log, make=make_run, module=module, **env)
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.stop()
