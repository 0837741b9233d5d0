"""Has the registry database changed since a read?  A cheap answer, for caches of reads.

SQLite keeps a counter per connection, ``PRAGMA data_version``, that changes whenever
another connection — of this process or of any other (training workers, other service
instances) — commits.  Read on a connection of its own that never writes (a few
microseconds, from the WAL index in shared memory), it tells a cache that nothing it
holds can be stale.  Other databases have no such counter: :meth:`ChangeCounter.value`
is then None, meaning "unknown", and callers read the database every time.

On an event loop the counter is read once per loop turn (issue 24: a one-row prediction
read it on every request).  That is never stale for a request: every request handled
until the turn's end is forgotten (a callback queued at the read) had its bytes read by
the loop before the read, so anything committed after the read is concurrent with it;
and a commit through this process's registry forgets the turn's value at once
(:meth:`ChangeCounter.forget`), so even a write on the loop is seen by the next read.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading

from sqlalchemy.engine import URL

__all__ = ["ChangeCounter"]


class ChangeCounter:
    """SQLite's ``data_version`` for one database file (thread-safe; fork-aware)."""

    def __init__(self, url: URL) -> None:
        database = url.database or ""
        file_backed = url.get_backend_name() == "sqlite" and database not in ("", ":memory:")
        self._path = database if file_backed and url.query.get("mode") != "memory" else None
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._turn: tuple[asyncio.AbstractEventLoop, int] | None = None  # read this turn

    def value(self) -> int | None:
        """A number that differs from the last one read if anything was committed since
        (None: unknown, treat everything as changed)."""
        if self._path is None:
            return None
        loop = asyncio.events._get_running_loop()  # the C call: None off the loop
        if loop is None:
            return self._read()
        turn = self._turn
        if turn is not None and turn[0] is loop:
            return turn[1]
        value = self._read()
        if value is not None:
            self._turn = (loop, value)
            loop.call_soon(self.forget)
        return value

    def forget(self) -> None:
        """Drop the value read in this loop turn (at a commit, or the turn's end)."""
        self._turn = None

    def _read(self) -> int | None:
        with self._lock:
            try:
                if self._connection is None or self._pid != os.getpid():
                    self._connection = sqlite3.connect(
                        f"file:{self._path}?mode=ro",
                        uri=True,
                        check_same_thread=False,
                        isolation_level=None,  # autocommit: never holds a snapshot open
                    )
                    self._pid = os.getpid()
                row = self._connection.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error:
                self._close_locked()
                return None
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._connection is not None and self._pid == os.getpid():
            self._connection.close()
        self._connection = None
