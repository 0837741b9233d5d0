"""The registry database: engine set-up per backend and schema migrations at start-up.

Only this module knows about backend specifics. For SQLite (the default, a file in the
data folder) every connection gets a 30 s busy timeout, foreign keys and fully
synchronous commits; the file is switched to WAL once so readers never block the writer;
and SQLAlchemy, not the ``sqlite3`` module, emits ``BEGIN``: ``BEGIN IMMEDIATE`` for
write transactions, so concurrent writers (threads or processes) queue on the database
lock up front instead of failing with "database is locked" when a read turns into a
write.

PostgreSQL (``postgresql+psycopg://...``) has no database-wide write lock: write
transactions run at READ COMMITTED and take the row or advisory locks they need (see
``lifecycle`` and ``versioning``), while reads run at REPEATABLE READ so that the few
queries of one read see one snapshot, as on SQLite. Every connection attempt gives up
after :data:`CONNECT_TIMEOUT_S` and TCP keepalives detect a server that vanished, so a
database that goes away makes requests fail fast (503) instead of hanging.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import URL, Connection, Engine, make_url

from ensembles.errors import StorageError

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S: Final = 30.0
WRITE_OPTION: Final = "ensembles_registry_write"
"""Execution option marking a connection whose transaction will write."""
MIGRATIONS: Final = Path(__file__).parent / "migrations"
_MIGRATION_LOCK_KEY: Final = 0x456E7352  # arbitrary, constant: "EnsR"
CONNECT_TIMEOUT_S: Final = 5
"""How long one connection attempt to a database server may take (libpq's minimum is 2)."""
POOL_TIMEOUT_S: Final = 10.0
_POSTGRES_CONNECT_ARGS: Final[dict[str, object]] = {
    "connect_timeout": CONNECT_TIMEOUT_S,
    "application_name": "ensemble-service",
    # A peer that vanished (host down, network cut) is noticed within ~30 s, even idle
    # or mid-query, instead of the kernel's two hours.
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}


def dump_json(value: object) -> str:
    """JSON as every backend accepts it: NaN and infinities are refused, not written."""
    return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def database_url(data_dir: Path, url: str | None) -> URL:
    """The configured URL, or the default SQLite file ``<data_dir>/registry.db``."""
    if url:
        return make_url(url)
    return URL.create("sqlite+pysqlite", database=str(data_dir / "registry.db"))


def create_engine(url: URL) -> Engine:
    """An engine for ``url``, with the SQLite set-up described above when it is SQLite."""
    backend = url.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url)
    connect_args = _POSTGRES_CONNECT_ARGS if backend == "postgresql" else {}
    return sa.create_engine(
        url,
        pool_pre_ping=True,
        pool_timeout=POOL_TIMEOUT_S,
        connect_args=dict(connect_args),
        json_serializer=dump_json,
    )


def for_reading(conn: Connection) -> Connection:
    """Make ``conn``'s next transaction a consistent snapshot (before it begins).

    SQLite's read transactions are snapshots already (WAL); PostgreSQL's default, READ
    COMMITTED, takes a new snapshot per statement, so reads ask for REPEATABLE READ.
    """
    if conn.dialect.name == "postgresql":
        conn.execution_options(isolation_level="REPEATABLE READ")
    return conn


def _sqlite_engine(url: URL) -> Engine:
    database = url.database or ""
    if database in ("", ":memory:") or url.query.get("mode") == "memory":
        raise ValueError("the registry needs an SQLite *file*: every connection must share it")
    if not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(
        url, connect_args={"timeout": BUSY_TIMEOUT_S}, json_serializer=dump_json
    )
    sa.event.listen(engine, "connect", _on_sqlite_connect)
    sa.event.listen(engine, "begin", _on_sqlite_begin)
    _enable_wal(engine)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _record: object) -> None:
    # Stop the sqlite3 module from issuing its own BEGIN (see _on_sqlite_begin).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _on_sqlite_begin(connection: Connection) -> None:
    write = bool(connection.get_execution_options().get(WRITE_OPTION))
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _enable_wal(engine: Engine) -> None:
    """Switch the file to WAL (persistent, so once per file; retried while it is busy)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        raw = engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute("PRAGMA journal_mode = WAL")
            row = cursor.fetchone()
            cursor.close()
            mode = str(row[0]).lower() if row else "unknown"
            if mode != "wal":
                log.warning("SQLite refused WAL mode (journal_mode=%s); readers may block", mode)
            return
        except Exception as exc:  # raw sqlite3 errors here, not SQLAlchemy's wrappers
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        finally:
            raw.close()
        time.sleep(0.05)


def alembic_config() -> Config:
    """An Alembic configuration pointing at the migrations shipped in this package."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the package ships no migrations"
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema up to ``revision`` in one write transaction.

    The transaction holds the write lock (SQLite ``BEGIN IMMEDIATE``, a Postgres
    advisory lock), so processes starting together migrate once, one after the other;
    DDL is transactional on both, so a failed upgrade leaves the previous schema.
    """
    target = head_revision() if revision == "head" else revision
    if current_revision(engine) == target:
        return
    _migrate(engine, lambda config: command.upgrade(config, revision))


def downgrade(engine: Engine, revision: str) -> None:
    """Take the schema back to ``revision`` (an operator's tool; the service never does)."""
    _migrate(engine, lambda config: command.downgrade(config, revision))


def _migrate(engine: Engine, run: Callable[[Config], None]) -> None:
    config = alembic_config()
    with engine.connect() as connection:
        connection.execution_options(**{WRITE_OPTION: True})
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY}
                )
            config.attributes["connection"] = connection
            try:
                run(config)
            except CommandError as exc:  # e.g. a database written by a newer release
                raise StorageError(f"cannot migrate the registry database: {exc}") from exc
