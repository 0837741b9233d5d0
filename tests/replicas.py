"""What several service instances share to act as one service: a database and an object
store. Each instance keeps its own data folder (locks, metrics), as on separate machines.

:class:`SharedBackends` says where both are, as settings for an in-process app
(``tests/api``) or as environment variables for a real server process (``tests/e2e``),
so a test written against it runs unchanged on SQLite or PostgreSQL: swap
``database_url``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ensembles.registry.stores import StoreConfig


@dataclass(frozen=True)
class SharedBackends:
    """The registry database URL and the object store of a group of replicas."""

    database_url: str
    store: StoreConfig

    @classmethod
    def sqlite(cls, folder: Path, store: StoreConfig) -> SharedBackends:
        """A SQLite file outside every replica's data folder, shared by all of them."""
        folder.mkdir(parents=True, exist_ok=True)
        return cls(f"sqlite+pysqlite:///{folder / 'registry.db'}", store)

    def settings(self) -> dict[str, Any]:
        """Overrides of ``app.settings.Settings`` for one replica."""
        return {
            "database_url": self.database_url,
            "object_store": self.store.url,
            "s3_endpoint_url": self.store.endpoint_url,
        }

    def environment(self) -> dict[str, str]:
        """The same as ``ENSEMBLE_*`` variables, for a server process."""
        env = {"ENSEMBLE_DATABASE_URL": self.database_url}
        if self.store.url:
            env["ENSEMBLE_OBJECT_STORE"] = self.store.url
        if self.store.endpoint_url:
            env["ENSEMBLE_S3_ENDPOINT_URL"] = self.store.endpoint_url
        return env
