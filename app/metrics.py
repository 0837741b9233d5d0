"""A minimal Prometheus text exposition: requests, latency, predictions, jobs, cache.

Kept dependency-free on purpose; a later issue may swap in prometheus-client.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.counts[i] += 1
        self.total += value
        self.n += 1


@dataclass
class Metrics:
    """Counters of this process (reset at start, as Prometheus expects)."""

    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    latency: dict[tuple[str, str], _Histogram] = field(default_factory=dict)
    predictions: int = 0
    prediction_rows: int = 0

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests[(method, route, str(status))] += 1
        self.latency.setdefault((method, route), _Histogram()).observe(seconds)


def _labels(**labels: str) -> str:
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in labels.items()
    )
    return "{" + inner + "}"


def render(metrics: Metrics, jobs: dict[str, int], cache: dict[str, int]) -> str:
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: Iterable[tuple[str, Any]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{labels} {value}" for labels, value in samples)

    family(
        "ensemble_http_requests_total",
        "counter",
        "HTTP requests by method, route and status.",
        (
            (_labels(method=m, route=r, status=s), n)
            for (m, r, s), n in sorted(metrics.requests.items())
        ),
    )
    histogram: list[tuple[str, Any]] = []
    for (method, route), h in sorted(metrics.latency.items()):
        for bound, count in zip(BUCKETS, h.counts, strict=True):
            histogram.append((_labels(method=method, route=route, le=f"{bound:g}"), count))
        histogram.append((_labels(method=method, route=route, le="+Inf"), h.n))
    lines.append("# HELP ensemble_http_request_duration_seconds Request latency by route.")
    lines.append("# TYPE ensemble_http_request_duration_seconds histogram")
    for labels, value in histogram:
        lines.append(f"ensemble_http_request_duration_seconds_bucket{labels} {value}")
    for (method, route), h in sorted(metrics.latency.items()):
        labels = _labels(method=method, route=route)
        lines.append(f"ensemble_http_request_duration_seconds_sum{labels} {h.total}")
        lines.append(f"ensemble_http_request_duration_seconds_count{labels} {h.n}")
    family(
        "ensemble_predictions_total",
        "counter",
        "Prediction requests answered.",
        [("", metrics.predictions)],
    )
    family(
        "ensemble_prediction_rows_total",
        "counter",
        "Rows predicted.",
        [("", metrics.prediction_rows)],
    )
    family(
        "ensemble_training_jobs",
        "gauge",
        "Training jobs in the registry by status.",
        ((_labels(status=s), n) for s, n in sorted(jobs.items())),
    )
    family(
        "ensemble_model_cache_events_total",
        "counter",
        "Model cache hits, misses, loads and evictions.",
        ((_labels(event=k), v) for k, v in sorted(cache.items()) if k != "bytes"),
    )
    family(
        "ensemble_model_cache_bytes",
        "gauge",
        "Artifact bytes of the models held in memory.",
        [("", cache.get("bytes", 0))],
    )
    return "\n".join(lines) + "\n"


class MetricsMiddleware:
    """Counts every HTTP request by its route template (not its raw path)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "<unmatched>"
            self.metrics.observe(scope["method"], path, status, time.perf_counter() - started)
