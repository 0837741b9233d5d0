"""Which registry instances are alive, for every process that shares the database.

Lock files (:mod:`instances`) are an exact proof of life, but only for processes that
share the data folder. Replicas on other machines share the database only, so each open
registry also holds a *lease*: a row in ``instances`` whose ``expires_at`` a daemon
thread pushes :data:`LEASE_S` ahead every ``lease / 5`` seconds, until :meth:`close`
removes it. A process that dies keeps its row; once the lease has run out, the others
may fail its jobs and sweep its files.

The owner ``X`` of a job or a file is judged (:class:`Census`) by, in order:

1. a lock file ``X.lock`` in our ``locks/`` folder: whether it is held (exact, as the
   kernel drops the lock of a process that dies, SIGKILL included);
2. else a row of ``X`` from our folder: dead (it released its lock, or died before
   taking it could not happen: the row is written after the lock);
3. else a row of ``X`` from another folder: alive while its lease runs;
4. else dead (never registered, or forgotten once its lease had run out).

Times are the database server's (PostgreSQL's ``clock_timestamp()``) so replicas on
machines whose clocks disagree still agree on leases; a SQLite file is shared by the
processes of one machine, which share its clock.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ensembles.errors import StorageError
from ensembles.registry.instances import InstanceLock
from ensembles.registry.schema import instances

log = logging.getLogger(__name__)

LEASE_S: Final = 30.0
"""How long an instance that stopped beating counts as alive (a pause, a slow database)."""
BEATS_PER_LEASE: Final = 5
T = TypeVar("T")
Write = Callable[[Callable[[Connection], T]], T]


def database_now(conn: Connection) -> datetime:
    """The clock every instance agrees on: the server's, or ours for a SQLite file."""
    if conn.dialect.name == "postgresql":
        value: datetime = conn.execute(sa.select(sa.func.clock_timestamp())).scalar_one()
        return value.astimezone(UTC)
    return datetime.now(UTC)


class Census:
    """A snapshot of who is alive, judged as the module docstring says."""

    def __init__(
        self,
        lock: InstanceLock,
        folder: str,
        leases: Mapping[str, tuple[str, datetime]],
        now: datetime,
    ) -> None:
        self.lock, self.folder, self.leases, self.now = lock, folder, leases, now

    def is_alive(self, owner: str | None) -> bool:
        if owner is None:
            return False
        if self.lock.has_file(owner):
            return self.lock.is_alive(owner)
        lease = self.leases.get(owner)
        if lease is None:
            return False
        folder, expires_at = lease
        return folder != self.folder and expires_at > self.now

    def is_dead(self, owner: str | None) -> bool:
        return not self.is_alive(owner)

    def forget_dead(self, conn: Connection) -> int:
        """Delete the rows of dead instances: expired leases, or dead members of our folder.

        An expired row is deleted only if it is still expired, so an instance that
        renewed since this snapshot keeps its row.
        """
        dead = [owner for owner in self.leases if owner != self.lock.id and self.is_dead(owner)]
        if not dead:
            return 0
        gone = sa.or_(instances.c.folder == self.folder, instances.c.expires_at <= self.now)
        query = sa.delete(instances).where(instances.c.id.in_(sorted(dead)), gone)
        return int(conn.execute(query).rowcount)


class Lease:
    """This instance's row in ``instances``, kept fresh by a daemon thread."""

    def __init__(self, lock: InstanceLock, folder: str, write: Write[object], lease_s: float):
        if lease_s <= 0:
            raise ValueError("lease_s must be > 0")
        self.lock, self.folder, self.lease_s = lock, folder, lease_s
        self._write = write
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def take(self) -> None:
        """Write our row (before anyone may judge us from another folder)."""
        self._write(self._renew)

    def start(self) -> None:
        """Keep the lease fresh from a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="registry-lease", daemon=True)
        self._thread.start()

    def stop(self, *, remove: bool) -> None:
        """Stop beating; ``remove``: delete our row (a clean close: we are dead now)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
        if remove:
            self._write(self._forget)

    def census(self, conn: Connection) -> Census:
        """Who is alive now, read on ``conn`` (the lock files are probed as needed)."""
        now = database_now(conn)
        query = sa.select(instances.c.id, instances.c.folder, instances.c.expires_at)
        leases = {str(i): (str(f), e) for i, f, e in conn.execute(query)}
        return Census(self.lock, self.folder, leases, now)

    def _run(self) -> None:
        interval = self.lease_s / BEATS_PER_LEASE
        while not self._stop.wait(interval):
            try:
                self._write(self._renew)
            except (StorageError, sa.exc.SQLAlchemyError) as exc:
                if not self._failing:  # once per outage, not every beat
                    log.warning("could not renew this instance's lease: %s", exc)
                self._failing = True
            else:
                if self._failing:
                    log.info("renewed this instance's lease again")
                self._failing = False

    def _forget(self, conn: Connection) -> None:
        conn.execute(sa.delete(instances).where(instances.c.id == self.lock.id))

    def _renew(self, conn: Connection) -> None:
        now = database_now(conn)
        expires = now + timedelta(seconds=self.lease_s)
        mine = instances.c.id == self.lock.id
        update = sa.update(instances).where(mine).values(heartbeat_at=now, expires_at=expires)
        if conn.execute(update).rowcount == 1:
            return
        if self._thread is not None:
            # Another instance forgot us (our lease ran out: a long pause or outage) and
            # may have failed our jobs; from now on we count as alive again.
            log.warning("this instance's lease had run out; registering it again")
        conn.execute(
            sa.insert(instances).values(
                id=self.lock.id,
                folder=self.folder,
                host=socket.gethostname()[:255],
                pid=os.getpid(),
                started_at=now,
                heartbeat_at=now,
                expires_at=expires,
            )
        )
