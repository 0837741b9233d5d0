"""The one place that decides which backend a configuration opens."""

from __future__ import annotations

from pathlib import Path

from ensembles.registry.base import Registry
from ensembles.registry.sql import SqlRegistry
from ensembles.registry.stores import StoreConfig


def open_registry(
    data_dir: Path | str, database_url: str | None = None, store: StoreConfig | None = None
) -> Registry:
    """Open the registry in ``data_dir`` (on ``database_url``, SQLite there by default),
    its bytes where ``store`` says; the caller closes it."""
    return SqlRegistry.open(data_dir, database_url, store)
