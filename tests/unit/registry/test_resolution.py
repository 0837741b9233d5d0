"""Version references resolved from memory: never stale, whoever changed the database.

``resolve_version`` (the prediction path) keeps what it resolved while SQLite's
``data_version`` is unchanged; any commit — an alias moved here, a version published or
deleted by another process — makes the next call read the database again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from ensembles.errors import NotFoundError
from ensembles.registry import ModelCache, SqlRegistry
from ensembles.registry.changes import ChangeCounter

from .support import publish


def test_a_resolved_reference_is_reused_until_the_database_changes(data_dir: Path) -> None:
    """SQLite only: its counter is what is tested (PostgreSQL has none: never reused)."""
    registry = SqlRegistry.open(data_dir)
    publish(registry, "iris")
    assert registry.resolved_version("iris", "latest") is None  # nothing resolved yet
    first = registry.resolve_version("iris", "latest")
    assert registry.resolved_version("iris", "latest") is first
    assert registry.resolve_version("iris", "latest") is first
    publish(registry, "iris")
    assert registry.resolved_version("iris", "latest") is None
    assert registry.resolve_version("iris", "latest").version == 2
    registry.close()


def test_aliases_moved_and_versions_deleted_are_seen_at_once(registry: SqlRegistry) -> None:
    for _ in range(3):
        publish(registry, "iris")
    registry.set_alias("iris", "prod", 1)
    assert registry.resolve_version("iris", "prod").version == 1
    registry.set_alias("iris", "prod", 2)
    assert registry.resolve_version("iris", "prod").version == 2
    assert registry.resolve_version("iris", 3).version == 3
    registry.delete_version("iris", 3)
    with pytest.raises(NotFoundError):
        registry.resolve_version("iris", 3)


def test_commits_of_another_process_are_seen(data_dir: Path, database_url: str | None) -> None:
    """A second registry on the same folder stands for a worker process publishing."""
    with SqlRegistry.open(data_dir, database_url) as server:
        publish(server, "iris")
        assert server.resolve_version("iris", "latest").version == 1
        with SqlRegistry.open(data_dir, database_url) as other:
            publish(other, "iris")
        assert server.resolve_version("iris", "latest").version == 2


def test_other_databases_have_no_counter() -> None:
    assert ChangeCounter(sa.make_url("postgresql://user@host/db")).value() is None
    assert ChangeCounter(sa.make_url("sqlite://")).value() is None


def test_peek_never_loads() -> None:
    cache = ModelCache(max_entries=2, max_bytes=100)
    assert cache.peek(("m", 1, "h")) is None
    assert cache.get_or_load(("m", 1, "h"), lambda: "loaded", 1) == "loaded"
    hits = cache.hits
    assert cache.peek(("m", 1, "h")) == "loaded"
    assert cache.hits == hits + 1 and cache.loads == 1


async def test_on_the_event_loop_a_commit_is_seen_at_once(data_dir: Path) -> None:
    """The registry's SQLite file is in WAL mode: the counter reads the WAL-index header
    at every call, so even a commit made by another process within the same loop turn
    is seen by the next call (it was read once per turn, and then missed it)."""
    with SqlRegistry.open(data_dir) as server, SqlRegistry.open(data_dir) as other:
        publish(server, "iris")
        assert server.resolve_version("iris", "latest").version == 1
        publish(other, "iris")  # another process, in the same turn
        assert server.resolved_version("iris", "latest") is None
        assert server.resolve_version("iris", "latest").version == 2
        server.set_alias("iris", "prod", 1)  # through this registry: at once, same turn
        assert server.resolve_version("iris", "prod").version == 1
        server.set_alias("iris", "prod", 2)
        assert server.resolve_version("iris", "prod").version == 2


def test_off_the_loop_every_call_reads(data_dir: Path) -> None:
    with SqlRegistry.open(data_dir) as server, SqlRegistry.open(data_dir) as other:
        publish(server, "iris")
        assert server.resolve_version("iris", "latest").version == 1
        publish(other, "iris")
        assert server.resolved_version("iris", "latest") is None
