from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from ensembles.registry import SqlRegistry
from ensembles.registry.schema import metadata

# Opt-in: run the registry-fixture tests against another database, e.g.
# ENSEMBLE_TEST_DATABASE_URL=postgresql+psycopg://user@host/db (its tables are dropped).
OTHER_DATABASE = os.environ.get("ENSEMBLE_TEST_DATABASE_URL")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def database_url() -> Iterator[str | None]:
    if not OTHER_DATABASE:
        yield None
        return
    _drop_everything(OTHER_DATABASE)
    yield OTHER_DATABASE
    _drop_everything(OTHER_DATABASE)


def _drop_everything(url: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            metadata.drop_all(conn)
            conn.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))
    finally:
        engine.dispose()


@pytest.fixture
def registry(data_dir: Path, database_url: str | None) -> Iterator[SqlRegistry]:
    opened = SqlRegistry.open(data_dir, database_url)
    yield opened
    opened.close()
