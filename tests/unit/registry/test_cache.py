"""ModelCache: LRU by count and by bytes, single-flight loads, no stale entries."""

from __future__ import annotations

import threading
import time

import pytest

from ensembles.registry import ModelCache, SqlRegistry

from .support import publish


def _value(name: str) -> object:
    return {"loaded": name}


def test_least_recently_used_entry_goes_first_when_count_is_exceeded() -> None:
    cache = ModelCache(max_entries=2, max_bytes=1_000)
    cache.get_or_load(("a", 1, "s"), lambda: _value("a"), 10)
    cache.get_or_load(("b", 1, "s"), lambda: _value("b"), 10)
    cache.get_or_load(("a", 1, "s"), lambda: pytest.fail("a is cached"), 10)  # a is now fresh
    cache.get_or_load(("c", 1, "s"), lambda: _value("c"), 10)
    assert ("b", 1, "s") not in cache
    assert ("a", 1, "s") in cache and ("c", 1, "s") in cache
    assert (cache.hits, cache.misses, cache.loads, cache.evictions) == (1, 3, 3, 1)
    assert len(cache) == 2 and cache.bytes == 20


def test_total_bytes_are_bounded() -> None:
    cache = ModelCache(max_entries=10, max_bytes=100)
    cache.get_or_load(("a", 1, "s"), lambda: _value("a"), 60)
    cache.get_or_load(("b", 1, "s"), lambda: _value("b"), 30)
    cache.get_or_load(("c", 1, "s"), lambda: _value("c"), 50)
    assert ("a", 1, "s") not in cache
    assert cache.bytes == 80 and len(cache) == 2


def test_an_entry_larger_than_the_budget_is_served_but_not_kept() -> None:
    cache = ModelCache(max_entries=10, max_bytes=100)
    cache.get_or_load(("a", 1, "s"), lambda: _value("a"), 60)
    assert cache.get_or_load(("big", 1, "s"), lambda: _value("big"), 101) == _value("big")
    assert ("big", 1, "s") not in cache and ("a", 1, "s") in cache


def test_a_new_checksum_for_the_same_version_is_a_different_entry() -> None:
    cache = ModelCache(max_entries=10, max_bytes=1_000)
    assert cache.get_or_load(("m", 1, "old"), lambda: _value("old"), 1) == _value("old")
    assert cache.get_or_load(("m", 1, "new"), lambda: _value("new"), 1) == _value("new")


def test_invalidate_drops_a_version_or_a_whole_model() -> None:
    cache = ModelCache(max_entries=10, max_bytes=1_000)
    for key in [("m", 1, "s"), ("m", 2, "s"), ("n", 1, "s")]:
        cache.get_or_load(key, lambda: _value("x"), 5)
    cache.invalidate_model("m", 1)
    assert ("m", 1, "s") not in cache and ("m", 2, "s") in cache
    cache.invalidate_model("m")
    assert len(cache) == 1 and cache.bytes == 5


def test_concurrent_misses_on_one_key_load_once() -> None:
    cache = ModelCache(max_entries=10, max_bytes=1_000)
    calls = 0
    gate = threading.Barrier(8)

    def loader() -> object:
        nonlocal calls
        calls += 1
        time.sleep(0.1)
        return object()

    results: list[object] = []

    def worker() -> None:
        gate.wait()
        results.append(cache.get_or_load(("m", 1, "s"), loader, 1))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == 1 and cache.loads == 1
    assert len(results) == 8 and all(result is results[0] for result in results)


def test_a_failed_load_reaches_every_waiter_and_caches_nothing() -> None:
    cache = ModelCache(max_entries=10, max_bytes=1_000)
    started = threading.Event()
    errors: list[BaseException] = []

    def failing() -> object:
        started.set()
        time.sleep(0.05)
        raise RuntimeError("unreadable")

    def waiter() -> None:
        started.wait()
        try:
            cache.get_or_load(("m", 1, "s"), lambda: pytest.fail("must wait"), 1)
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    with pytest.raises(RuntimeError):
        cache.get_or_load(("m", 1, "s"), failing, 1)
    thread.join()
    assert len(errors) == 1 and len(cache) == 0
    assert cache.get_or_load(("m", 1, "s"), lambda: _value("retry"), 1) == _value("retry")


def test_a_load_invalidated_while_in_flight_is_not_kept() -> None:
    cache = ModelCache(max_entries=10, max_bytes=1_000)

    def loader() -> object:
        cache.invalidate_model("m")  # e.g. the model was deleted meanwhile
        return _value("stale")

    assert cache.get_or_load(("m", 1, "s"), loader, 1) == _value("stale")
    assert ("m", 1, "s") not in cache


def test_moving_an_alias_never_serves_the_old_model(registry: SqlRegistry) -> None:
    cache = ModelCache(max_entries=10, max_bytes=10**9)
    publish(registry, "m", value={"v": 1})
    publish(registry, "m", value={"v": 2})

    def serve(ref: str) -> object:
        record = registry.get_version("m", ref)
        key = (record.model, record.version, record.artifact_sha256)
        return cache.get_or_load(
            key, lambda: registry.load_model("m", record.version), record.artifact_size
        )

    registry.set_alias("m", "production", 1)
    assert serve("production") == {"v": 1}
    registry.set_alias("m", "production", 2)
    assert serve("production") == {"v": 2}
    registry.delete_alias("m", "production")
    registry.delete_model("m")
    cache.invalidate_model("m")
    publish(registry, "m", value={"v": 3})
    assert serve("latest") == {"v": 3}
    assert len(cache) == 1


def test_bounds_must_not_be_negative() -> None:
    with pytest.raises(ValueError):
        ModelCache(max_entries=-1, max_bytes=10)


class _Recorder:
    """A CacheObserver that keeps what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.held: list[tuple[int, int]] = []

    def counted(self, event: str, n: int) -> None:
        self.events.append((event, n))

    def holding(self, entries: int, size: int) -> None:
        self.held.append((entries, size))


def test_an_observer_is_told_each_event_as_it_happens() -> None:
    seen = _Recorder()
    cache = ModelCache(max_entries=2, max_bytes=1_000, observer=seen)
    cache.get_or_load(("a", 1, "s"), lambda: _value("a"), 10)
    assert cache.peek(("a", 1, "s")) == _value("a")
    assert cache.peek(("z", 1, "s")) is None  # not a miss: nothing was loaded
    cache.get_or_load(("b", 1, "s"), lambda: _value("b"), 20)
    cache.get_or_load(("c", 1, "s"), lambda: _value("c"), 30)  # evicts a
    cache.invalidate_model("b")
    cache.clear()
    assert seen.events == [
        ("miss", 1),
        ("load", 1),
        ("hit", 1),
        ("miss", 1),
        ("load", 1),
        ("miss", 1),
        ("load", 1),
        ("eviction", 1),
    ]
    assert seen.held == [(1, 10), (2, 30), (2, 50), (1, 30), (0, 0)]
    totals = {event: sum(n for e, n in seen.events if e == event) for event, _ in seen.events}
    assert totals == {
        "hit": cache.hits,
        "miss": cache.misses,
        "load": cache.loads,
        "eviction": cache.evictions,
    }
