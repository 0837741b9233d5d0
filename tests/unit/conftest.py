"""Fixtures shared by the unit tests of the registry's stored tables and their readers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ensembles.registry import Registry, open_registry


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    """An embedded registry (SQLite, a local folder) in the test's own folder."""
    opened = open_registry(tmp_path / "data")
    yield opened
    opened.close()
