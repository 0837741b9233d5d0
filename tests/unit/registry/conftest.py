"""Every registry test that takes ``database_url`` runs on both backends: the default
SQLite file and a fresh database on a real PostgreSQL server (tests/postgres.py).

Their ids end in ``[sqlite]`` or ``[postgres]``: ``pytest tests/unit/registry -k postgres``
runs one backend. A PostgreSQL test fails (never skips) where no server can be run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ensembles.registry import SqlRegistry

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """None (SQLite in the data folder) or the URL of a new PostgreSQL database."""
    if backend == "sqlite":
        return None
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def registry(data_dir: Path, database_url: str | None) -> Iterator[SqlRegistry]:
    opened = SqlRegistry.open(data_dir, database_url)
    yield opened
    opened.close()
