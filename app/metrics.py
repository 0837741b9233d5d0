"""Prometheus metrics of one app, on a registry of its own (several apps in one process,
as in the tests, never share or collide).

Counted as things happen: HTTP requests and their latency per route template and
status, requests in progress, predictions per model, training durations. Read at each
scrape: jobs by status (one ``GROUP BY`` in the registry database) and the model cache
counters. Also the process's CPU, memory and file descriptors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
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
from prometheus_client.registry import Collector

from ensembles.registry import ModelCache

log = logging.getLogger(__name__)

REQUEST_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
TRAINING_BUCKETS: Final = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
UNMATCHED: Final = "<unmatched>"

# The *_created series of every counter and histogram double the output for no use here.
disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    """The metrics of one app; :meth:`watch` adds the state read at each scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ("method", "route", "status")
        self.requests = Counter(
            "ensemble_http_requests",
            "HTTP requests by method, route template and status.",
            labels,
            registry=self.registry,
        )
        self.latency = Histogram(
            "ensemble_http_request_duration_seconds",
            "HTTP request latency by method, route template and status.",
            labels,
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.in_progress = Gauge(
            "ensemble_http_requests_in_progress",
            "HTTP requests being served now.",
            registry=self.registry,
        )
        self.predictions = Counter(
            "ensemble_predictions",
            "Prediction requests answered, by model.",
            ("model",),
            registry=self.registry,
        )
        self.prediction_rows = Counter(
            "ensemble_prediction_rows",
            "Rows predicted, by model.",
            ("model",),
            registry=self.registry,
        )
        self.training = Histogram(
            "ensemble_training_duration_seconds",
            "Wall time of training jobs from start to end, by final status.",
            ("status",),
            buckets=TRAINING_BUCKETS,
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)
        self._state: _StateCollector | None = None

    def watch(self, jobs: Callable[[], Mapping[str, int]], cache: ModelCache) -> None:
        """Report ``jobs()`` (counts by status) and the cache's counters at each scrape
        (replacing what an earlier run of the lifespan watched)."""
        if self._state is not None:
            self.registry.unregister(self._state)
        self._state = _StateCollector(jobs, cache)
        self.registry.register(self._state)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = (method, route, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def observe_prediction(self, model: str, rows: int) -> None:
        self.predictions.labels(model).inc()
        self.prediction_rows.labels(model).inc(rows)

    def observe_training(self, status: str, seconds: float) -> None:
        self.training.labels(status).observe(max(seconds, 0.0))

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The text format the scraper asked for (Prometheus or OpenMetrics) and its type.

        Blocking (the job counts are a database query): call it from a worker thread.
        """
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class _StateCollector(Collector):
    """State owned by others, read when scraped rather than mirrored on every change."""

    def __init__(self, jobs: Callable[[], Mapping[str, int]], cache: ModelCache) -> None:
        self.jobs = jobs
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        try:
            counts = self.jobs()
        except Exception as exc:  # a scrape must not fail because the database does
            log.warning("could not count jobs for /metrics: %s", exc)
        else:
            jobs = GaugeMetricFamily(
                "ensemble_training_jobs", "Training jobs by status.", labels=["status"]
            )
            for status, n in sorted(counts.items()):
                jobs.add_metric([status], n)
            yield jobs
        cache = self.cache
        for name, help_text, value in (
            ("hits", "Predictions that found their model loaded.", cache.hits),
            ("misses", "Predictions that had to load their model.", cache.misses),
            ("loads", "Models loaded from their artifact.", cache.loads),
            ("evictions", "Models dropped to stay within the cache bounds.", cache.evictions),
        ):
            yield CounterMetricFamily(f"ensemble_model_cache_{name}", help_text, value=value)
        yield GaugeMetricFamily(
            "ensemble_model_cache_bytes", "Artifact bytes of the models in memory.", cache.bytes
        )
        yield GaugeMetricFamily(
            "ensemble_model_cache_entries", "Models held in memory.", len(cache)
        )
