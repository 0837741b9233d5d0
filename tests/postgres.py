"""A real, throw-away PostgreSQL server for the tests (no mocks, no shared instance).

:class:`PostgresServer` runs Debian's server binaries (``initdb``, ``pg_ctl``) on a
cluster in a temporary folder, listening on a free port of 127.0.0.1 with its Unix
socket in that folder, and removes everything when stopped. The server refuses to run
as root, so under root (as in CI) it runs as the ``postgres`` OS user that Debian's
package creates (or ``nobody``), and the folder is handed to that user.

Databases are cheap: :meth:`PostgresServer.create_database` copies ``template0`` (a few
tens of milliseconds with ``fsync`` off, which is safe here: the tests kill clients, never
this server, and the cluster is discarded anyway).

When the binaries are missing and we are root, ``scripts/test_deps.sh`` installs them
(``make test`` runs it first anyway); when that is impossible the fixture *fails* with
:data:`HOW_TO_GET_IT`, so a machine without PostgreSQL never passes by skipping.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.network import free_port

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
TEST_DEPS: Final = REPO_ROOT / "scripts" / "test_deps.sh"
BIN_ENV: Final = "ENSEMBLE_TEST_PG_BIN"
SUPERUSER: Final = "ensemble"
HOW_TO_GET_IT: Final = (
    "the PostgreSQL tests need PostgreSQL's server binaries (initdb, pg_ctl): run `make test` "
    "as root (scripts/test_deps.sh installs Debian's `postgresql` package), or install it "
    "yourself (`sudo apt-get install postgresql`), or set ENSEMBLE_TEST_PG_BIN to the folder "
    "holding initdb and pg_ctl"
)
START_TIMEOUT_S: Final = 60


class PostgresUnavailableError(RuntimeError):
    """No server can be run here; the message says how to get one."""


def find_bin_dir() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: $ENSEMBLE_TEST_PG_BIN, else the newest
    Debian ``/usr/lib/postgresql/<major>/bin``, else whatever ``PATH`` has."""
    configured = os.environ.get(BIN_ENV)
    if configured:
        return Path(configured) if (Path(configured) / "initdb").is_file() else None
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        newest = max(found, key=lambda path: int(Path(path).parts[-3].split(".")[0]))
        return Path(newest).parent
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return Path(initdb).parent
    return None


def ensure_bin_dir() -> Path:
    """:func:`find_bin_dir`, installing the package first when root may; else
    :class:`PostgresUnavailableError`."""
    bin_dir = find_bin_dir()
    if bin_dir is None and os.geteuid() == 0 and TEST_DEPS.is_file():
        subprocess.run(["bash", str(TEST_DEPS), "postgresql"], check=False)
        bin_dir = find_bin_dir()
    if bin_dir is None:
        raise PostgresUnavailableError(HOW_TO_GET_IT)
    return bin_dir


@dataclass(frozen=True)
class _RunAs:
    uid: int
    gid: int

    @classmethod
    def for_server(cls) -> _RunAs | None:
        """None when we are not root (the server runs as us); else an unprivileged user."""
        if os.geteuid() != 0:
            return None
        for name in ("postgres", "nobody"):
            with contextlib.suppress(KeyError):
                entry = pwd.getpwnam(name)
                return cls(entry.pw_uid, entry.pw_gid)
        raise PostgresUnavailableError("running as root and no unprivileged user to run PostgreSQL")


class PostgresServer:
    """One cluster in a temporary folder; :meth:`start`, :meth:`stop`, then :meth:`remove`."""

    def __init__(self, bin_dir: Path | None = None) -> None:
        self.bin_dir = bin_dir or ensure_bin_dir()
        self.run_as = _RunAs.for_server()
        self.root = Path(tempfile.mkdtemp(prefix="ensemble-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log_file = self.root / "server.log"
        self.port = 0
        self._count = 0
        self.socket_dir.mkdir()
        if self.run_as is not None:
            for path in (self.root, self.socket_dir):
                os.chown(path, self.run_as.uid, self.run_as.gid)
        self._run(
            "initdb",
            "--pgdata",
            str(self.data),
            "--username",
            SUPERUSER,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if self.run_as is not None:
            kwargs = {"user": self.run_as.uid, "group": self.run_as.gid, "extra_groups": []}
        result = subprocess.run(
            [str(self.bin_dir / tool), *args],
            capture_output=True,
            text=True,
            cwd=self.root,
            check=False,
            **kwargs,  # type: ignore[arg-type]
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{tool} failed ({result.returncode}): {result.stderr.strip()}\n{self.log()}"
            )
        return result

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def start(self) -> PostgresServer:
        """Start (or restart, on the same port once it had one) and wait until it accepts."""
        self.port = self.port or free_port()
        options = " ".join(
            [
                f"-p {self.port}",
                "-c listen_addresses=127.0.0.1",
                f"-c unix_socket_directories={self.socket_dir}",
                "-c max_connections=300",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c shared_buffers=32MB",
            ]
        )
        self._run(
            "pg_ctl",
            "start",
            "--pgdata",
            str(self.data),
            "--log",
            str(self.log_file),
            "--wait",
            "--timeout",
            str(START_TIMEOUT_S),
            "--options",
            options,
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: disconnects clients at once); no error if stopped."""
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "--pgdata", str(self.data), "--mode", mode, "--wait")

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        """An SQLAlchemy URL of ``database`` over TCP (as a remote server would be)."""
        return f"{driver}://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str) -> None:
        """Run one statement as the superuser outside any transaction (CREATE DATABASE)."""
        import psycopg

        dsn = f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname=postgres"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql)

    def create_database(self, prefix: str = "test") -> str:
        """A new empty database (from ``template0``); its name."""
        self._count += 1
        name = f"{prefix}_{os.getpid()}_{self._count}_{time.monotonic_ns() % 10**6}"
        self.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return name

    def drop_database(self, name: str) -> None:
        """Drop ``name``, disconnecting whoever still uses it."""
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
