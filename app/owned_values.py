"""Metric values that one thread, the event loop's, updates without a lock.

prometheus-client keeps each value of a process's own metrics in a ``MutexValue``: a
float and a ``threading.Lock`` taken by every ``inc`` and ``get``.  A one-row request
made eleven such updates (requests in progress up and down, the request counter, the
latency histogram's sum and bucket, the prediction counters, the two batch histograms'
sums and buckets), each a Python call taking and releasing a lock: ~9 us of the
request's CPU (issue 24.3), almost all of it on the event loop's thread, where requests
are answered one at a time.

:class:`OwnedValue` replaces a ``MutexValue`` in a labelled child or metric, with the
same ``inc``/``set``/``get`` (and exemplar) methods, locked, for any thread, plus a
second float, ``owned``, that only the *owner* thread adds to, with a plain ``+=`` and
no call (:class:`app.metrics.Metrics` does the adding inline).  ``get`` (the scrape,
from any thread) answers the sum of the two, under the lock: the same metric families,
names, labels and buckets, the same ``/metrics`` text.  When the owner makes every
update, the locked float stays 0.0 and ``0.0 + owned`` is ``owned`` to the bit: the
same values as one float updated in order.

Why the owner's ``+=`` needs no lock: a Python ``x.owned += a`` can be cut by a thread
switch between its read and its write, and then another writer's update in between
would be lost; but only the owner ever writes ``owned`` (every other thread goes
through ``inc``, on the locked float), and a scrape only reads it (one attribute read,
atomic under the GIL; a scrape may see a histogram's bucket before its sum moved, as it
may with prometheus-client's own values).  The owner is a thread id: ids are unique
among live threads, so two threads never both take the owner's path.

Only a process's own values are replaced: in the multiprocess mode (several server
processes) values live in prometheus-client's shared files, and are left as they are.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.values import MutexValue

__all__ = ["OwnedHistogram", "OwnedValue", "owned_histogram", "owned_value"]


class OwnedValue:
    """A ``MutexValue`` with a lock-free part for its owner thread (see the module)."""

    __slots__ = ("_exemplar", "_lock", "_value", "owned")
    _multiprocess = False

    def __init__(self) -> None:
        self._value = 0.0  # every other thread's updates, under the lock
        self._exemplar: Any = None
        self._lock = threading.Lock()
        self.owned = 0.0  # the owner thread's, without it

    def inc(self, amount: float) -> None:
        with self._lock:
            self._value += amount

    def set(self, value: float, timestamp: float | None = None) -> None:
        with self._lock:
            self._value = value - self.owned

    def set_exemplar(self, exemplar: Any) -> None:
        with self._lock:
            self._exemplar = exemplar

    def get(self) -> float:
        with self._lock:
            return self._value + self.owned

    def get_exemplar(self) -> Any:
        with self._lock:
            return self._exemplar


def owned_value(metric: Counter | Gauge) -> OwnedValue | None:
    """``metric``'s value (a child, or a metric without labels) replaced by an
    :class:`OwnedValue` holding what it held (the one already there if replaced
    before); None for another kind of value (multiprocess values, another
    prometheus-client's): leave those to their methods."""
    old = getattr(metric, "_value", None)
    if type(old) is OwnedValue:  # (a child two label sets share: the model's rows)
        return old
    if type(old) is not MutexValue:
        return None
    new = metric._value = _copy(old)
    return new


def _copy(old: MutexValue) -> OwnedValue:
    """An :class:`OwnedValue` holding what ``old`` holds."""
    new = OwnedValue()
    with old._lock:
        new._value = old._value
        new._exemplar = old._exemplar
    return new


class OwnedHistogram:
    """A histogram's owned values: its sum, its buckets and their upper bounds (the
    last +Inf), for :func:`app.metrics` to update inline."""

    __slots__ = ("bounds", "buckets", "total")

    def __init__(
        self, total: OwnedValue, buckets: tuple[OwnedValue, ...], bounds: tuple[float, ...]
    ) -> None:
        self.total = total
        self.buckets = buckets
        self.bounds = bounds

    def observe(self, amount: float) -> None:
        """``Histogram.observe(amount)`` for the owner: the sum, and the first bucket whose
        bound holds the amount (none for NaN)."""
        self.total.owned += amount
        if amount == amount:  # (``amount <= bound`` is false for every bound)
            self.buckets[bisect_left(self.bounds, amount)].owned += 1.0


def owned_histogram(histogram: Histogram) -> OwnedHistogram | None:
    """``histogram``'s sum and buckets replaced by :class:`OwnedValue` (see
    :func:`owned_value`); None when they are not ``MutexValue``."""
    try:
        total, buckets = histogram._sum, list(histogram._buckets)
        bounds = tuple(histogram._upper_bounds)
    except AttributeError:
        return None
    values = (total, *buckets)
    if len(bounds) == len(buckets) and all(type(v) is OwnedValue for v in values):
        return OwnedHistogram(total, tuple(buckets), bounds)  # (replaced before)
    if len(bounds) != len(buckets) or any(type(v) is not MutexValue for v in values):
        return None
    owned = OwnedHistogram(_copy(total), tuple(_copy(b) for b in buckets), bounds)
    histogram._sum = owned.total
    histogram._buckets = list(owned.buckets)
    return owned
