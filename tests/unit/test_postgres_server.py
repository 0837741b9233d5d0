"""The PostgreSQL test server (tests/postgres.py): a missing server is a failure that says
how to get one, never a skip; a running one is a real server on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.postgres import (
    BIN_ENV,
    HOW_TO_GET_IT,
    PostgresServer,
    PostgresUnavailableError,
    ensure_bin_dir,
)


def test_no_server_binaries_is_an_error_saying_how_to_get_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BIN_ENV, str(tmp_path))  # a folder without initdb
    with pytest.raises(PostgresUnavailableError, match="apt-get install postgresql") as caught:
        ensure_bin_dir()
    assert str(caught.value) == HOW_TO_GET_IT


def test_the_session_server_gives_each_test_its_own_database(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            assert (
                conn.execute(sa.text("SELECT inet_server_addr()::text")).scalar() == "127.0.0.1/32"
            )
            assert (
                conn.execute(
                    sa.text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
                ).scalar()
                == 0
            )
            name = conn.execute(sa.text("SELECT current_database()")).scalar()
    finally:
        engine.dispose()
    assert postgres_url.endswith(f"/{name}") and f":{postgres_server.port}/" in postgres_url
