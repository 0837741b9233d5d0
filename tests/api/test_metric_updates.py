"""The request's metric updates made straight on prometheus-client's values give the
very exposition its public methods give (counts, sums, every bucket)."""

from __future__ import annotations

import math
import threading
from pathlib import Path

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


def _public(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every update through prometheus-client's public methods, its own values kept."""
    monkeypatch.setattr(metrics_module, "_adder", lambda metric: metric.inc)
    monkeypatch.setattr(metrics_module, "_observer", lambda histogram: histogram.observe)
    monkeypatch.setattr(metrics_module, "owned_value", lambda metric: None)
    monkeypatch.setattr(metrics_module, "owned_histogram", lambda histogram: None)


def test_the_owner_threads_updates_go_without_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first thread to start a request owns this process's values: its updates are
    the owned floats, the lock-free part (app.owned_values)."""
    metrics = Metrics()
    metrics.request_started()
    metrics.observe_request("POST", "/v1/p", 200, 0.01)
    metrics.observe_prediction("iris", 3, 1, "")
    metrics.observe_batch(3, 1)
    metrics.request_ended()
    series = metrics._request_children[("POST", "/v1/p", 200)]
    assert series.count is not None and series.count.owned == 1.0
    assert series.latency.total.owned == 0.01
    assert metrics._prediction_children[("iris", 1, "")].rows.owned == 3.0


def test_updates_of_other_threads_add_up_with_the_owners(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another thread (a worker's batch, a second event loop) takes the locked path;
    the exposition is the sum, as if every update went through the public methods."""

    def updated(metrics: Metrics) -> str:
        metrics.request_started()  # this thread owns the values
        for turn in range(40):
            other = threading.Thread(target=lambda t=turn: _some_updates(metrics, t))
            other.start()
            _some_updates(metrics, turn + 1000)
            other.join()
        metrics.request_ended()
        lines = metrics.exposition(None)[0].decode().splitlines()
        return "\n".join(line for line in lines if not line.startswith("process_"))

    mixed = updated(Metrics())
    _public(monkeypatch)
    assert mixed == updated(Metrics())
    assert "ensemble_http_requests_in_progress 0.0" in mixed


def _some_updates(metrics: Metrics, turn: int) -> None:
    for i in range(25):
        metrics.request_started()
        metrics.observe_request("POST", "/v1/p", 200 if i % 3 else 422, (turn * i % 97) / 64)
        metrics.observe_prediction("iris", i % 4, 1 + i % 2, "" if i % 2 else "prod")
        metrics.observe_batch((turn + i) * 37 % 2000, 1 + i % 3)
        metrics.request_ended()


def test_multiprocess_values_are_left_to_prometheus_client(tmp_path: Path) -> None:
    """(Their exposition, merged from the files, is tests/api/test_workers.py's.)"""
    metrics = Metrics(shared_folder=tmp_path)
    metrics.request_started()
    metrics.observe_request("POST", "/v1/p", 200, 0.01)
    metrics.observe_prediction("iris", 3, 1, "")
    metrics.observe_batch(3, 1)
    metrics.request_ended()
    assert metrics._in_progress_owned is None and metrics._batch_rows_owned is None
    assert metrics._request_children[("POST", "/v1/p", 200)].count is None
    assert metrics._prediction_children[("iris", 1, "")].answered is None
    metrics.close(last=True)
