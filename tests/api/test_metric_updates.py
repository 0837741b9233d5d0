"""The request's metric updates made straight on prometheus-client's values give the
very exposition its public methods give (counts, sums, every bucket)."""

from __future__ import annotations

import math

import pytest

from app import metrics as metrics_module
from app.metrics import REQUEST_BUCKETS, Metrics


def _updated(metrics: Metrics) -> str:
    seconds = [0.0, 0.0049, *REQUEST_BUCKETS, 0.0051, 31.0, 1e9, math.nan]
    for i, value in enumerate(seconds):
        metrics.request_started()
        metrics.observe_request("POST", "/v1/p", 200 if i % 3 else 422, value)
        metrics.observe_prediction("iris", i % 4, 1 + i % 2, "" if i % 2 else "prod")
        metrics.observe_batch(i * 37 % 2000, 1 + i % 3)
        if i % 4:
            metrics.request_ended()
    lines = metrics.exposition(None)[0].decode().splitlines()
    return "\n".join(
        line for line in lines if "_created" not in line and not line.startswith("process_")
    )


def test_straight_updates_expose_what_the_public_methods_expose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    straight = _updated(Metrics())
    monkeypatch.setattr(metrics_module, "_adder", lambda metric: metric.inc)
    monkeypatch.setattr(metrics_module, "_observer", lambda histogram: histogram.observe)
    public = _updated(Metrics())
    assert straight == public
    assert "ensemble_http_requests_in_progress 5.0" in straight
    assert 'ensemble_batch_rows_bucket{le="+Inf"} 18.0' in straight
