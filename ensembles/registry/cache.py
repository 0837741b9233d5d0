"""Loaded models kept in memory: a thread-safe LRU bounded by entry count and by bytes.

Keys are ``(model, version, artifact_sha256)``. The registry resolves a reference
(alias, ``latest``) to a version record on every request and only then asks the cache,
so moving an alias or re-training changes the key and a stale entry is simply never
asked for; deleting a model or version should still call :meth:`invalidate_model` to
free the memory. Artifact size on disk is the cost of an entry: cheap to know up front
and proportional to the unpickled size for scikit-learn models.

An optional :class:`CacheObserver` is told of every event as it happens (for metrics
that must be counted where they occur, e.g. summed over several server processes).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal, Protocol

CacheKey = tuple[str, int, str]
CacheEvent = Literal["hit", "miss", "load", "eviction"]


class CacheObserver(Protocol):
    """Told of the cache's events, under its lock: keep both methods quick."""

    def counted(self, event: CacheEvent, n: int) -> None:
        """``n`` more events of this kind."""

    def holding(self, entries: int, size: int) -> None:
        """What the cache holds now, after a change."""


@dataclass(frozen=True)
class _Entry:
    value: object
    size: int


class ModelCache:
    """LRU of loaded models; concurrent misses on one key share a single load.

    Counters (read them for metrics): ``hits``, ``misses`` (calls that found no entry,
    including those that waited for another thread's load), ``loads``, ``evictions``
    and ``bytes`` (total cost of the entries held).
    """

    def __init__(
        self, max_entries: int, max_bytes: int, observer: CacheObserver | None = None
    ) -> None:
        if max_entries < 0 or max_bytes < 0:
            raise ValueError("cache bounds must be >= 0 (0 disables caching)")
        self.observer = observer
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self.loads = 0
        self.evictions = 0
        self.bytes = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[CacheKey, _Entry] = OrderedDict()
        self._loading: dict[CacheKey, Future[object]] = {}
        self._generation: dict[str, int] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def peek(
        self, key: CacheKey, usable: Callable[[object], bool] | None = None, *, hit: bool = True
    ) -> object | None:
        """The cached value of ``key`` (a hit), or None without loading (not a miss).

        Never blocks on a load: for callers that may answer at once when the value is
        already there (on an event loop) and otherwise go the slower way.  ``usable``: the
        caller's test that it can answer with the value at once; a value it declines is
        None here and no hit, since the slower way's :meth:`get_or_load` counts the
        request's one hit.  ``hit=False``: a look that counts nothing.
        """
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or (usable is not None and not usable(entry.value)):
                return None
            self._entries.move_to_end(key)
            if not hit:
                return entry.value
            self.hits += 1
            if self.observer is not None:
                self.observer.counted("hit", 1)
            return entry.value

    def get_or_load(self, key: CacheKey, loader: Callable[[], object], size: int) -> object:
        """The cached value of ``key``, or ``loader()``'s result (cached when it fits).

        Call from a worker thread: ``loader`` (unpickling) blocks. If it raises, every
        caller waiting on the same key gets the exception and nothing is cached.
        """
        if size < 0:
            raise ValueError("size must be >= 0")
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                if self.observer is not None:
                    self.observer.counted("hit", 1)
                return entry.value
            self.misses += 1
            if self.observer is not None:
                self.observer.counted("miss", 1)
            pending = self._loading.get(key)
            if pending is None:
                pending = self._loading[key] = Future()
                generation = self._generation.get(key[0], 0)
                owner = True
            else:
                owner = False
        if not owner:
            return pending.result()
        try:
            value = loader()
        except BaseException as exc:
            with self._lock:
                del self._loading[key]
            pending.set_exception(exc)
            raise
        with self._lock:
            del self._loading[key]
            self.loads += 1
            if self.observer is not None:
                self.observer.counted("load", 1)
            # Invalidated while loading: hand the value out but do not keep it.
            if generation == self._generation.get(key[0], 0):
                self._insert(key, _Entry(value, size))
        pending.set_result(value)
        return value

    def _insert(self, key: CacheKey, entry: _Entry) -> None:
        if entry.size > self.max_bytes or self.max_entries == 0:
            return  # would evict everything and still not fit
        self._entries[key] = entry
        self.bytes += entry.size
        evicted_now = 0
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.bytes -= evicted.size
            evicted_now += 1
        self.evictions += evicted_now
        if self.observer is not None:
            if evicted_now:
                self.observer.counted("eviction", evicted_now)
            self._report_holding()

    def _report_holding(self) -> None:
        if self.observer is not None:
            self.observer.holding(len(self._entries), self.bytes)

    def invalidate_model(self, name: str, version: int | None = None) -> None:
        """Drop the entries of a model (or of one version); loads in flight are not kept."""
        with self._lock:
            self._generation[name] = self._generation.get(name, 0) + 1
            for key in [k for k in self._entries if k[0] == name and version in (None, k[1])]:
                self.bytes -= self._entries.pop(key).size
            self._report_holding()

    def clear(self) -> None:
        with self._lock:
            for name in {key[0] for key in self._entries} | {key[0] for key in self._loading}:
                self._generation[name] = self._generation.get(name, 0) + 1
            self._entries.clear()
            self.bytes = 0
            self._report_holding()
