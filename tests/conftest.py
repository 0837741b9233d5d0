"""Fixtures every test folder may use: a real PostgreSQL server (see tests/postgres.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import PostgresServer, PostgresUnavailableError


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One server for the whole session, started on first use, removed at the end.

    Fails (never skips) when no server can be run here, saying how to get one.
    """
    try:
        server = PostgresServer()
    except PostgresUnavailableError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The SQLAlchemy URL of a new empty database, dropped after the test."""
    if not (postgres_server.data / "postmaster.pid").exists():
        postgres_server.start()  # a test stopped it (a fault test): serve the next one
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    if not (postgres_server.data / "postmaster.pid").exists():
        postgres_server.start()
    postgres_server.drop_database(name)
