"""The state and the transactions every part of the SQL registry shares.

A read gets a connection whose statements share one snapshot; a write takes the write
lock up front and commits on normal exit; both turn database errors into StorageError.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ensembles.errors import StorageError
from ensembles.registry import database
from ensembles.registry.base import ArtifactStore
from ensembles.registry.changes import ChangeCounter
from ensembles.registry.instances import InstanceLock, folder_id
from ensembles.registry.liveness import LEASE_S, Lease
from ensembles.registry.records import AliasRecord, VersionRecord

RESOLVED_MAX: Final = 1024  # references kept resolved by resolve_version / resolve_alias
T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


def json_copy(value: T, what: str) -> T:
    """A deep copy through JSON: proves ``value`` can be stored on every backend."""
    try:
        copied: T = json.loads(database.dump_json(value))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not storable as JSON: {exc}") from exc
    return copied


def short_reason(exc: BaseException) -> str:
    """A one-line reason for logs and readiness, without the SQL statement."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class SqlBase:
    """What the registry's parts share: the engine, the lease, the store, the caches."""

    def __init__(
        self,
        *,
        data_dir: Path,
        engine: Engine,
        lock: InstanceLock,
        store: ArtifactStore,
        lease_s: float = LEASE_S,
    ) -> None:
        """Use ``SqlRegistry.open``; this only wires already-prepared parts together."""
        self.data_dir = data_dir
        self.instance_id = lock.id
        self.store = store
        self._engine = engine
        self._lock = lock
        # Forced: the lease is also released while closing.
        self._lease = Lease(
            lock, folder_id(lock.folder), lambda step: self._run_write(step, force=True), lease_s
        )
        self._pid = self._opened_by = os.getpid()
        self._closed = False
        self._changes = ChangeCounter(engine.url)
        self._resolved: dict[tuple[str, str], tuple[int, VersionRecord]] = {}
        self._routes: dict[tuple[str, str], tuple[int, AliasRecord | None]] = {}

    def _connect(self, *, force: bool = False) -> Connection:
        if self._closed and not force:
            raise StorageError("the registry is closed")
        if os.getpid() != self._pid:  # forked: never share the parent's connections
            self._engine.dispose(close=False)
            self._pid = os.getpid()
        return self._engine.connect()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A connection for reads: its statements share one snapshot; never blocks (WAL)."""
        try:
            with self._connect() as conn:
                yield database.for_reading(conn)
        except sa.exc.SQLAlchemyError as exc:
            raise StorageError(f"registry database error: {short_reason(exc)}") from exc

    @contextmanager
    def _write(self, *, force: bool = False) -> Iterator[Connection]:
        """A write transaction, committed on normal exit; takes the write lock up front."""
        try:
            with self._connect(force=force) as conn:
                conn.execution_options(**{database.WRITE_OPTION: True})
                with conn.begin():
                    yield conn
                self._changes.forget()  # committed: the loop turn's counter is old
        except sa.exc.SQLAlchemyError as exc:
            raise StorageError(f"registry database error: {short_reason(exc)}") from exc

    def _run_write(self, step: Callable[[Connection], T], *, force: bool = False) -> T:
        with self._write(force=force) as conn:
            return step(conn)
