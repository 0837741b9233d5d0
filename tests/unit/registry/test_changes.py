"""The change counter of an SQLite file (``ensembles.registry.changes``): any commit by
any connection or process before a call is seen by it, whether the counter answers from
the WAL-index header (WAL mode) or from ``PRAGMA data_version`` (otherwise)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from ensembles.registry.changes import ChangeCounter


def _commit_elsewhere(path: Path, statements: int = 1, autocheckpoint: int = 1000) -> None:
    """``statements`` commits by another process (its own connection)."""
    code = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        f"c.execute('PRAGMA wal_autocheckpoint = {autocheckpoint}')\n"
        f"for i in range({statements}): c.execute('INSERT INTO t VALUES (?)', (i,))\n"
        "c.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)


def _database(tmp_path: Path, *, wal: bool) -> tuple[Path, sqlite3.Connection]:
    path = tmp_path / "registry.db"
    writer = sqlite3.connect(path, isolation_level=None)
    if wal:
        writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE t (x)")
    return path, writer


@pytest.fixture
def wal(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection, ChangeCounter]]:
    path, writer = _database(tmp_path, wal=True)
    counter = ChangeCounter(sa.make_url(f"sqlite:///{path}"))
    yield path, writer, counter
    counter.close()
    writer.close()


def test_in_wal_mode_the_header_answers(
    wal: tuple[Path, sqlite3.Connection, ChangeCounter],
) -> None:
    _, _, counter = wal
    first = counter.value()
    assert first is not None
    assert counter._memory >= 0  # the WAL-index header, not the PRAGMA
    assert counter.value() == first  # nothing committed


def test_commits_of_other_connections_and_processes_are_seen(
    wal: tuple[Path, sqlite3.Connection, ChangeCounter],
) -> None:
    path, writer, counter = wal
    seen = [counter.value()]
    writer.execute("INSERT INTO t VALUES (1)")  # another connection of this process
    seen.append(counter.value())
    _commit_elsewhere(path)  # another process
    seen.append(counter.value())
    assert len(set(seen)) == 3
    assert counter.value() == seen[-1]


def test_commits_after_checkpoints_and_wal_restarts_are_seen(
    wal: tuple[Path, sqlite3.Connection, ChangeCounter],
) -> None:
    path, writer, counter = wal
    before = counter.value()
    for mode in ("PASSIVE", "RESTART", "TRUNCATE"):
        writer.execute(f"PRAGMA wal_checkpoint({mode})")
        checkpointed = counter.value()
        writer.execute("INSERT INTO t VALUES (1)")  # the WAL starts again from its top
        after = counter.value()
        assert after not in (before, checkpointed)
        before = after
    _commit_elsewhere(path, statements=40, autocheckpoint=2)  # restarts in another process
    assert counter.value() != before


def test_the_last_other_connection_closing_changes_nothing(
    wal: tuple[Path, sqlite3.Connection, ChangeCounter],
) -> None:
    """The counter's own connection keeps the ``-shm`` file SQLite maps: the last other
    connection closing does not delete it, and later commits are still seen."""
    path, writer, counter = wal
    before = counter.value()
    writer.close()
    assert Path(f"{path}-shm").exists()
    _commit_elsewhere(path)
    assert counter._memory >= 0
    assert counter.value() != before


async def test_on_the_loop_a_commit_in_the_same_turn_is_seen(
    wal: tuple[Path, sqlite3.Connection, ChangeCounter],
) -> None:
    path, _, counter = wal
    before = counter.value()
    _commit_elsewhere(path)  # no await: the same loop turn
    assert counter.value() != before


def test_numbers_of_a_new_connection_never_repeat_old_ones(
    wal: tuple[Path, sqlite3.Connection, ChangeCounter],
) -> None:
    _, writer, counter = wal
    seen = set()
    for _ in range(3):
        seen.add(counter.value())
        writer.execute("INSERT INTO t VALUES (1)")
        seen.add(counter.value())
        counter.close()
    assert len(seen) == 6


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_reads_its_own_mapping(
    wal: tuple[Path, sqlite3.Connection, ChangeCounter],
) -> None:
    path, _, counter = wal
    before = counter.value()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's status is the result
        ok = False
        try:
            first = counter.value()
            ok = counter._memory >= 0
            connection = sqlite3.connect(path, isolation_level=None)
            connection.execute("INSERT INTO t VALUES (1)")
            ok = ok and counter.value() != first
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert status == 0
    assert counter.value() != before  # the child's commit, seen by the parent


async def test_without_wal_the_pragma_answers_once_per_turn(tmp_path: Path) -> None:
    path, writer = _database(tmp_path, wal=False)
    counter = ChangeCounter(sa.make_url(f"sqlite:///{path}"))
    try:
        before = counter.value()
        assert before is not None and counter._memory < 0
        writer.execute("INSERT INTO t VALUES (1)")  # concurrent with this turn's requests
        assert counter.value() == before
        await asyncio.sleep(0)  # the next turn reads again
        assert counter.value() != before
    finally:
        counter.close()
        writer.close()


def test_without_wal_off_the_loop_every_call_reads(tmp_path: Path) -> None:
    path, writer = _database(tmp_path, wal=False)
    counter = ChangeCounter(sa.make_url(f"sqlite:///{path}"))
    try:
        before = counter.value()
        writer.execute("INSERT INTO t VALUES (1)")
        assert counter.value() != before
    finally:
        counter.close()
        writer.close()
