"""Prometheus metrics of one app, on a registry of its own (several apps in one process,
as in the tests, never share or collide).

Counted as things happen: HTTP requests and their latency per route template and
status, requests in progress, predictions per model, training durations. Read at each
scrape: jobs by status (one ``GROUP BY`` in the registry database) and the model cache
counters. Also the process's CPU, memory and file descriptors.

With several server processes (``ENSEMBLE_WORKERS`` > 1) a scrape is answered by one of
them but must cover all: the metrics then live in prometheus-client's multiprocess files
(a private folder the launcher made, ``PROMETHEUS_MULTIPROC_DIR``) and are merged at each
scrape. Counters and histograms add up over every process that ever served; the gauges
of a process count only while it lives (``livesum``: requests in progress, models and
bytes in each process's cache); the model cache counts where each hit, miss, load and
eviction happens (a :class:`CacheObserver`); CPU, memory and file descriptors are read
for each live server process and labelled with its ``pid``; jobs by status still come
from the database, once per scrape.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from threading import get_ident
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from app.owned_values import OwnedHistogram, OwnedValue, owned_histogram, owned_value
from app.server.metrics_folder import MetricsFolder
from ensembles.registry import CacheEvent, ModelCache

log = logging.getLogger(__name__)

REQUEST_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TRAINING_BUCKETS: Final = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
UNMATCHED: Final = "<unmatched>"
MODEL_LABEL: Final = "model"
# What a scrape that may not list the models does not see: in a family labelled by model,
# these labels are summed away (the landing page lists models only to a reader too).
NAMING_LABELS: Final = frozenset({MODEL_LABEL, "version", "alias"})
_CACHE_COUNTERS: Final[dict[CacheEvent, tuple[str, str]]] = {
    "hit": ("hits", "Predictions that found their model loaded."),
    "miss": ("misses", "Predictions that had to load their model."),
    "load": ("loads", "Models loaded from their artifact."),
    "eviction": ("evictions", "Models dropped to stay within the cache bounds."),
}
_CACHE_BYTES: Final = ("ensemble_model_cache_bytes", "Artifact bytes of the models in memory.")
_CACHE_ENTRIES: Final = ("ensemble_model_cache_entries", "Models held in memory.")

# The *_created series of every counter and histogram double the output for no use here.
disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    """The metrics of one app; :meth:`watch` adds the state read at each scrape.

    ``shared_folder``: the multiprocess folder when this is one of several server
    processes (see the module's documentation); None: this process's own figures.
    """

    def __init__(self, shared_folder: Path | None = None) -> None:
        self.registry = CollectorRegistry()
        self.shared = None if shared_folder is None else MetricsFolder(shared_folder)
        # Shared: the values go to this process's files and are exposed merged with the
        # other processes'; registering them too would count this process twice.
        own = self.registry if self.shared is None else None
        labels = ("method", "route", "status")
        self.requests = Counter(
            "ensemble_http_requests",
            "HTTP requests by method, route template and status.",
            labels,
            registry=own,
        )
        self.latency = Histogram(
            "ensemble_http_request_duration_seconds",
            "HTTP request latency by method, route template and status.",
            labels,
            buckets=REQUEST_BUCKETS,
            registry=own,
        )
        self.in_progress = Gauge(
            "ensemble_http_requests_in_progress",
            "HTTP requests being served now.",
            registry=own,
            multiprocess_mode="livesum",
        )
        self.predictions = Counter(
            "ensemble_predictions",
            "Prediction requests answered, by model, the version that answered and the "
            "alias it was reached through (empty when called by number or latest).",
            ("model", "version", "alias"),
            registry=own,
        )
        self.prediction_rows = Counter(
            "ensemble_prediction_rows",
            "Rows predicted, by model.",
            ("model",),
            registry=own,
        )
        self.training = Histogram(
            "ensemble_training_duration_seconds",
            "Wall time of training jobs from start to end, by final status.",
            ("status",),
            buckets=TRAINING_BUCKETS,
            registry=own,
        )
        self.batch_rows = Histogram(
            "ensemble_batch_rows",
            "Rows per engine call of a prediction (several requests' when batched).",
            buckets=BATCH_BUCKETS,
            registry=own,
        )
        self.batch_requests = Histogram(
            "ensemble_batch_requests",
            "Requests answered per engine call (1: not batched).",
            buckets=BATCH_BUCKETS,
            registry=own,
        )
        self._cache_observer: _CacheCounters | None = None
        if self.shared is None:
            ProcessCollector(registry=self.registry)
        else:
            self._cache_observer = _CacheCounters()
            MultiProcessCollector(self.registry, path=str(self.shared.path))  # type: ignore[no-untyped-call]
            self.registry.register(_ProcessesCollector(self.shared))
        self._state: list[Collector] = []
        self._request_children: dict[tuple[str, str, int], _RequestSeries] = {}
        self._prediction_children: dict[tuple[str, int, str], _PredictionSeries] = {}
        # The event loop's thread updates this process's own values without locks
        # (app.owned_values); None: every update through the adders below (made after:
        # they update the values in place then).
        self._owner: int | None = None  # the thread that does: the first to start a request
        self._owner_lock = threading.Lock()
        self._own = self.shared is None
        self._in_progress_owned = owned_value(self.in_progress) if self._own else None
        self._batch_rows_owned = owned_histogram(self.batch_rows) if self._own else None
        self._batch_requests_owned = owned_histogram(self.batch_requests) if self._own else None
        self._in_progress = _adder(self.in_progress)
        self._batch_rows = _observer(self.batch_rows)
        self._batch_requests = _observer(self.batch_requests)

    def request_started(self) -> None:
        """One more request in progress."""
        gauge = self._in_progress_owned
        if gauge is not None and get_ident() == self._owner:
            gauge.owned += 1.0
            return
        self._in_progress(1)
        if self._owner is None and gauge is not None:
            with self._owner_lock:  # the first thread to start a request owns the values
                if self._owner is None:
                    self._owner = get_ident()

    def request_ended(self) -> None:
        """One request fewer in progress."""
        gauge = self._in_progress_owned
        if gauge is not None and get_ident() == self._owner:
            gauge.owned -= 1.0
        else:
            self._in_progress(-1)

    def cache_observer(self) -> _CacheCounters | None:
        """What a ModelCache should report its events to (None: it is read when scraped)."""
        return self._cache_observer

    def watch(self, jobs: Callable[[], Mapping[str, int]], cache: ModelCache) -> None:
        """Report ``jobs()`` (counts by status) and the cache's counters at each scrape
        (replacing what an earlier run of the lifespan watched)."""
        for collector in self._state:
            self.registry.unregister(collector)
        self._state = [_JobsCollector(jobs)]
        if self.shared is None:
            self._state.append(_CacheCollector(cache))
        for collector in self._state:
            self.registry.register(collector)

    def close(self, *, last: bool = False) -> None:
        """This server process stops serving: its live gauges no longer count. ``last``:
        the whole service is ending without its launcher, so remove this process's files
        (and the shared folder once it is empty)."""
        if self.shared is not None:
            self.shared.forget_self()
            if last:
                self.shared.remove_own_files()

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        # The labelled children are kept per label set: ``labels()`` takes a lock and
        # checks its values on every call, a cost paid by every request (label sets are
        # bounded: route templates, methods, statuses).
        key = (method, route, status)
        series = self._request_children.get(key)
        if series is None:
            with self._owner_lock:  # (made once: two threads never replace one value twice)
                series = self._request_children.get(key) or self._request_series(key)
                self._request_children[key] = series
        count = series.count
        if count is not None and get_ident() == self._owner:
            count.owned += 1.0
            series.latency.observe(seconds)
        else:
            series.add(1)
            series.observe(seconds)

    def _request_series(self, key: tuple[str, str, int]) -> _RequestSeries:
        labels = (key[0], key[1], str(key[2]))
        requests = self.requests.labels(*labels)
        latency = self.latency.labels(*labels)
        count = owned_value(requests) if self._own else None
        owned = owned_histogram(latency) if self._own else None
        series = _RequestSeries(_adder(requests), _observer(latency))  # (after: see __init__)
        if count is not None and owned is not None:
            series.count, series.latency = count, owned
        return series

    def observe_prediction(self, model: str, rows: int, version: int, alias: str) -> None:
        """``alias``: the alias the version was reached through ("" by number or latest)."""
        key = (model, version, alias)
        series = self._prediction_children.get(key)
        if series is None:  # kept per label set, as in observe_request
            with self._owner_lock:
                series = self._prediction_children.get(key) or self._prediction_series(key)
                self._prediction_children[key] = series
        answered = series.answered
        if answered is not None and get_ident() == self._owner:
            answered.owned += 1.0
            series.rows.owned += rows
        else:
            series.add(1)
            series.add_rows(rows)

    def _prediction_series(self, key: tuple[str, int, str]) -> _PredictionSeries:
        model, version, alias = key
        answered = self.predictions.labels(model, str(version), alias)
        rows = self.prediction_rows.labels(model)
        owned = owned_value(answered) if self._own else None
        owned_rows = owned_value(rows) if self._own else None
        series = _PredictionSeries(_adder(answered), _adder(rows))  # (after: see __init__)
        if owned is not None and owned_rows is not None:
            series.answered, series.rows = owned, owned_rows
        return series

    def observe_batch(self, rows: int, requests: int) -> None:
        """One engine call answering ``requests`` prediction requests, ``rows`` in all."""
        by_rows, by_requests = self._batch_rows_owned, self._batch_requests_owned
        if by_rows is not None and by_requests is not None and get_ident() == self._owner:
            by_rows.observe(rows)
            by_requests.observe(requests)
        else:
            self._batch_rows(rows)
            self._batch_requests(requests)

    def observe_training(self, status: str, seconds: float) -> None:
        self.training.labels(status).observe(max(seconds, 0.0))

    def exposition(self, accept: str | None, *, names: bool = True) -> tuple[bytes, str]:
        """The text format the scraper asked for (Prometheus or OpenMetrics) and its type;
        ``names`` false: without the labels that name models (see :class:`_Unnamed`).

        Blocking (the job counts are a database query): call it from a worker thread.
        """
        if self.shared is not None:
            self.shared.forget_dead()
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry if names else _Unnamed(self.registry)), content_type


Add = Callable[[float], None]  # one update of one value: an increment, an observation


class _RequestSeries:
    """A route's request counter and latency histogram for one label set: their
    updates through prometheus-client (any thread), and their owned values (None: none)."""

    __slots__ = ("add", "count", "latency", "observe")

    def __init__(self, add: Add, observe: Add) -> None:
        self.add = add
        self.observe = observe
        self.count: OwnedValue | None = None
        self.latency: OwnedHistogram = None  # type: ignore[assignment]  # set with count


class _PredictionSeries:
    """A model's prediction and row counters for one label set (as :class:`_RequestSeries`)."""

    __slots__ = ("add", "add_rows", "answered", "rows")

    def __init__(self, add: Add, add_rows: Add) -> None:
        self.add = add
        self.add_rows = add_rows
        self.answered: OwnedValue | None = None
        self.rows: OwnedValue = None  # type: ignore[assignment]  # set with answered


def _adder(metric: Counter | Gauge) -> Add:
    """``metric.inc`` (a labelled child or a metric without labels) straight on its value.

    A request updates eight values; through prometheus-client's public methods each
    update is three Python calls more (the method and two checks that the metric is not
    a parent with labels, which these never are), about a tenth of a one-row
    prediction's Python calls (issue 24).  The amounts are never negative but for a
    gauge.  A prometheus-client whose metrics are built otherwise gets the public method.
    """
    add = getattr(getattr(metric, "_value", None), "inc", None)
    return add if callable(add) else metric.inc


def _observer(histogram: Histogram) -> Add:
    """``histogram.observe`` (without an exemplar) straight on its values, as
    :func:`_adder` for counters: the sum, and the first bucket whose bound holds the
    amount (none for NaN), as prometheus-client does it."""
    try:
        add_sum = histogram._sum.inc
        bounds = tuple(histogram._upper_bounds)
        buckets = tuple(bucket.inc for bucket in histogram._buckets)
    except AttributeError:
        return histogram.observe
    if len(bounds) != len(buckets):
        return histogram.observe
    pairs = tuple(zip(bounds, buckets, strict=True))

    def observe(amount: float) -> None:
        add_sum(amount)
        for bound, add in pairs:
            if amount <= bound:
                add(1)
                break

    return observe


class _JobsCollector(Collector):
    """Jobs by status, read from the database when scraped (once, whatever the number of
    server processes)."""

    def __init__(self, jobs: Callable[[], Mapping[str, int]]) -> None:
        self.jobs = jobs

    def collect(self) -> Iterator[Metric]:
        try:
            counts = self.jobs()
        except Exception as exc:  # a scrape must not fail because the database does
            log.warning("could not count jobs for /metrics: %s", exc)
            return
        jobs = GaugeMetricFamily(
            "ensemble_training_jobs", "Training jobs by status.", labels=["status"]
        )
        for status, n in sorted(counts.items()):
            jobs.add_metric([status], n)
        yield jobs


class _CacheCollector(Collector):
    """One process's model cache, read when scraped rather than mirrored on every change."""

    def __init__(self, cache: ModelCache) -> None:
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self.cache
        values = {
            "hit": cache.hits,
            "miss": cache.misses,
            "load": cache.loads,
            "eviction": cache.evictions,
        }
        for event, (name, help_text) in _CACHE_COUNTERS.items():
            yield CounterMetricFamily(
                f"ensemble_model_cache_{name}", help_text, value=values[event]
            )
        yield GaugeMetricFamily(*_CACHE_BYTES, value=cache.bytes)
        yield GaugeMetricFamily(*_CACHE_ENTRIES, value=len(cache))


class _CacheCounters:
    """A cache observer counting into the multiprocess files as events happen: the sums
    over every process, and what each live process holds."""

    def __init__(self) -> None:
        self.counters = {
            event: Counter(f"ensemble_model_cache_{name}", help_text, registry=None)
            for event, (name, help_text) in _CACHE_COUNTERS.items()
        }
        self.bytes = Gauge(*_CACHE_BYTES, registry=None, multiprocess_mode="livesum")
        self.entries = Gauge(*_CACHE_ENTRIES, registry=None, multiprocess_mode="livesum")

    def counted(self, event: CacheEvent, n: int) -> None:
        self.counters[event].inc(n)

    def holding(self, entries: int, size: int) -> None:
        self.entries.set(entries)
        self.bytes.set(size)


class _ProcessesCollector(Collector):
    """``process_*`` (CPU, memory, file descriptors) of every live server process, each
    labelled with its ``pid``, read from /proc when scraped."""

    def __init__(self, folder: MetricsFolder) -> None:
        self.folder = folder
        self._pid = 0
        self._lock = threading.Lock()  # scrapes run in worker threads
        self._reader = ProcessCollector(pid=lambda: self._pid, registry=None)

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        with self._lock:
            readings = []
            for pid in self.folder.live_pids():
                self._pid = pid
                readings.append((pid, list(self._reader.collect())))
        for pid, metrics in readings:
            for metric in metrics:
                family = families.setdefault(
                    metric.name, Metric(metric.name, metric.documentation, metric.type)
                )
                for sample in metric.samples:
                    labels = {**sample.labels, "pid": str(pid)}
                    family.add_sample(sample.name, labels, sample.value)
        yield from families.values()


class _Unnamed(Collector):
    """The registry's metrics with the model, version and alias labels summed away in
    every family labelled by model: the totals stay, the names go."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            if not any(MODEL_LABEL in sample.labels for sample in metric.samples):
                yield metric
                continue
            sums: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
            for sample in metric.samples:
                kept = tuple(
                    (k, v) for k, v in sorted(sample.labels.items()) if k not in NAMING_LABELS
                )
                key = (sample.name, kept)
                sums[key] = sums.get(key, 0.0) + sample.value
            unnamed = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            for (name, labels), value in sums.items():
                unnamed.add_sample(name, dict(labels), value)
            yield unnamed
