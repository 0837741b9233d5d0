"""Has the registry database changed since a read?  A cheap answer, for caches of reads.

:meth:`ChangeCounter.value` is a number that differs from the last one read whenever
another connection — of this process or of any other (training workers, other service
instances) — committed since.  Other databases have no such number: it is then None,
meaning "unknown", and callers read the database every time.

**In WAL mode (the registry's): the WAL-index header.**  Every SQLite connection to a
WAL database maps the ``-shm`` file, whose first 48 bytes are a copy of the WAL-index
header (the documented file format, "WAL-Index Format"; ``walIndexWriteHdr`` in
``wal.c`` writes copy 1, a memory barrier, then copy 0).  Every commit writes it, and so
does every restart of the WAL after a checkpoint: its ``iChange`` is incremented at each
write, ``mxFrame`` and the frame checksums move with each commit, the salts with each
restart.  So if copy 0 holds the same 48 bytes as at a read, nothing was committed since
(a 32-bit ``iChange`` would have to wrap between two reads); any difference, even a half
written header read mid-commit, counts as a change (a false "changed" only costs the
caller a database read).  Reading them is one ``pread`` (1.9 us in process) where
``PRAGMA data_version`` opened a read transaction, took and released the WAL's read lock
(4.8 us in process, ~14 us of a served one-row request, issue 24.3).  Because it is that
cheap it is read at every call, on the loop or not: a commit that ended before the call
is seen.  (At 16 clients ~7 requests share a loop turn, and the PRAGMA was read once per
turn: there the per-call read costs about as much as it did, ~1 us a request more or
less; at one client, where every request is a turn, it is ~12 us less.)

Where the bytes are read: in SQLite's own mapping of the ``-shm`` file, through
``/proc/self/mem`` (one ``pread`` at the mapping's address).  Not through a file
descriptor of the counter's on the ``-shm`` file: closing it would release every POSIX
lock this process holds on that file (fcntl locks belong to the process and the inode),
SQLite's read locks and its "dead man switch" among them, and other connections could
then checkpoint over a snapshot being read or reinitialise the file under it.  Nor
through a mapping read in Python: a mapping read past the end of a truncated file kills
the process with SIGBUS, where ``/proc/self/mem`` only fails (EIO: the counter then falls
back, below).  The mapping found (``/proc/self/maps``: the ``-shm`` file's device and
inode, offset 0, not deleted) is SQLite's, and it stays what SQLite reads for as long as
the counter's own read-only connection is open: it read the database before the mapping
was looked up, and a connection in WAL mode keeps a SHARED lock on the database file
and the "dead man switch" lock on the ``-shm`` file until it closes.  SQLite deletes the
``-shm`` file only under an EXCLUSIVE lock on the database (the last connection
closing), truncates it only when it holds the dead man switch alone (the first
connection, recovering), leaves WAL mode only under an exclusive lock, and unmaps it only
when no connection of the process uses it: none of that happens while the counter's
connection is open, and :meth:`ChangeCounter.close` stops reading before closing it.

**Otherwise: ``PRAGMA data_version``** (a database not in WAL mode, no ``-shm`` file,
no ``/proc``, a URI file name), on the same connection, which never writes: SQLite's
counter of other connections' commits.  On an event loop it is read once per loop turn
(issue 24: a one-row prediction read it on every request).  That is never stale for a
request: every request handled until the turn's end is forgotten (a callback queued at
the read) had its bytes read by the loop before the read, so anything committed after
the read is concurrent with it; and a commit through this process's registry forgets
the turn's value at once (:meth:`ChangeCounter.forget`), so even a write on the loop is
seen by the next read.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading

from sqlalchemy.engine import URL

__all__ = ["ChangeCounter"]

_HEADER = 48  # bytes: copy 0 of the WAL-index header
_EPOCH = 1 << 48  # numbers of one connection never meet another's (see _read)


class ChangeCounter:
    """A change number for one SQLite database file (thread-safe; fork-aware)."""

    def __init__(self, url: URL) -> None:
        database = url.database or ""
        file_backed = url.get_backend_name() == "sqlite" and database not in ("", ":memory:")
        self._path = database if file_backed and url.query.get("mode") != "memory" else None
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._turn: tuple[asyncio.AbstractEventLoop, int] | None = None  # read this turn
        self._base = 0  # added to the numbers of the current connection
        self._memory = -1  # /proc/self/mem while the header answers, else -1
        self._address = 0  # where SQLite maps the -shm file's first bytes
        self._header = b""  # the header last read
        self._number = 0  # the number the header answers (+1 at each change seen)

    def value(self) -> int | None:
        """A number that differs from the last one read if anything was committed since
        (None: unknown, treat everything as changed)."""
        if self._path is None:
            return None
        memory = self._memory
        if memory >= 0 and self._pid == os.getpid():
            try:
                header = os.pread(memory, _HEADER, self._address)
            except OSError:
                header = b""
            if len(header) != _HEADER:
                self.close()  # not SQLite's mapping any more: reconnect at the next call
                return None
            if header != self._header:
                with self._lock:
                    if header != self._header:
                        self._header = header
                        self._number += 1
            return self._number
        loop = asyncio.events._get_running_loop()  # the C call: None off the loop
        if loop is None:
            return self._read()
        turn = self._turn
        if turn is not None and turn[0] is loop:
            return turn[1]
        value = self._read()
        if value is not None and self._memory < 0:
            self._turn = (loop, value)
            loop.call_soon(self.forget)
        return value

    def forget(self) -> None:
        """Drop the value read in this loop turn (at a commit, or the turn's end)."""
        self._turn = None

    def _read(self) -> int | None:
        """``PRAGMA data_version`` (connecting first: then the header may answer)."""
        with self._lock:
            try:
                if self._connection is None or self._pid != os.getpid():
                    self._drop_locked()
                    self._connection = sqlite3.connect(
                        f"file:{self._path}?mode=ro",
                        uri=True,
                        check_same_thread=False,
                        isolation_level=None,  # autocommit: never holds a snapshot open
                    )
                    self._pid = os.getpid()
                    # A new connection counts from its own start: its numbers are kept
                    # apart from every earlier one's, so none repeats an old token.
                    self._base += _EPOCH
                    row = self._connection.execute("PRAGMA data_version").fetchone()
                    if self._watch_header(self._connection):
                        return self._number
                else:
                    row = self._connection.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error:
                self._close_locked()
                return None
        return self._base + int(row[0])

    def _watch_header(self, connection: sqlite3.Connection) -> bool:
        """Answer from the WAL-index header from now on, when the database is in WAL mode
        and SQLite's mapping of its ``-shm`` file is found (see the module)."""
        path = self._path
        if path is None or path.startswith("file:"):
            return False
        (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
        if str(mode).lower() != "wal":
            return False
        address = _shm_address(os.path.realpath(path) + "-shm")
        if address is None:
            return False
        try:
            memory = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            header = os.pread(memory, _HEADER, address)
        except OSError:
            header = b""
        if len(header) != _HEADER:
            os.close(memory)
            return False
        self._memory, self._address, self._header = memory, address, header
        self._number = self._base
        return True

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._pid == os.getpid() and self._connection is not None:
            self._drop_locked()  # (first: no read of the mapping after its close)
            self._connection.close()
        self._drop_locked()
        self._connection = None

    def _drop_locked(self) -> None:
        """Stop answering from the header (a forked child closes its copy of the parent's
        /proc/self/mem, which reads the parent's memory)."""
        memory, self._memory = self._memory, -1
        if memory >= 0:
            os.close(memory)  # (not the -shm file: no lock of SQLite's goes with it)


def _shm_address(shm: str) -> int | None:
    """Where this process maps the first bytes of the file ``shm`` (SQLite's mapping:
    that file's device and inode, offset 0, not deleted), from ``/proc/self/maps``; None when
    there is no such mapping or no ``/proc``."""
    try:
        status = os.stat(shm)
        with open("/proc/self/maps", encoding="latin-1") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) < 6 or fields[4] != str(status.st_ino):
                    continue
                span, _perms, offset, device, _inode, name = fields
                major, _, minor = device.partition(":")
                if (
                    int(offset, 16) == 0
                    and os.makedev(int(major, 16), int(minor, 16)) == status.st_dev
                    and not name.rstrip().endswith("(deleted)")
                ):
                    return int(span.split("-")[0], 16)
    except (OSError, ValueError):
        return None
    return None
