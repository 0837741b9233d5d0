"""Metrics (Prometheus, per app), request ids, structured logs, readiness, draining."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from app.logs import REQUEST_ID, JsonFormatter, TextFormatter, configure_logging
from app.main import create_app
from app.server.process import on_shutdown_signal
from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, forest, iris_frame, records


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample of the Prometheus text, None when absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


async def _metrics(api: Api) -> str:
    response = await api.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


# ---------------------------------------------------------------------------- metrics


async def test_requests_are_counted_by_route_template_and_status(api: Api) -> None:
    for name in ("a", "b", "c"):
        assert (await api.client.get(f"/v1/models/{name}")).status_code == 404
    await api.client.get("/healthz")
    await api.client.get("/no/such/path")
    text = await _metrics(api)
    labels = {"method": "GET", "route": "/v1/models/{name}", "status": "404"}
    assert _sample(text, "ensemble_http_requests_total", **labels) == 3
    assert _sample(text, "ensemble_http_request_duration_seconds_count", **labels) == 3
    assert _sample(text, "ensemble_http_request_duration_seconds_bucket", **labels, le="+Inf") == 3
    healthz = {"method": "GET", "route": "/healthz", "status": "200"}
    assert _sample(text, "ensemble_http_requests_total", **healthz) == 1
    unmatched = {"method": "GET", "route": "<unmatched>", "status": "404"}
    assert _sample(text, "ensemble_http_requests_total", **unmatched) == 1
    # Raw paths never become labels; the scrape itself is in progress while it renders.
    assert "/v1/models/a" not in text and "/no/such/path" not in text
    assert _sample(text, "ensemble_http_requests_in_progress") == 1
    assert "process_resident_memory_bytes" in text


async def test_predictions_training_jobs_and_cache(api: Api) -> None:
    dataset = await api.iris()
    await api.train("m", forest(dataset, n_estimators=3))
    rows = records(iris_frame().head(3), IRIS_FEATURES)
    for _ in range(2):
        response = await api.predict("m", "latest", {"instances": rows})
        assert response.status_code == 200
    assert (await api.predict("m", 7, {"instances": rows})).status_code == 404
    text = await _metrics(api)
    assert _sample(text, "ensemble_predictions_total", model="m", version="1", alias="") == 2
    assert _sample(text, "ensemble_prediction_rows_total", model="m") == 6
    assert _sample(text, "ensemble_training_jobs", status="succeeded") == 1
    assert _sample(text, "ensemble_training_jobs", status="running") == 0
    assert _sample(text, "ensemble_training_duration_seconds_count", status="succeeded") == 1
    assert (_sample(text, "ensemble_training_duration_seconds_sum", status="succeeded") or 0) > 0
    assert _sample(text, "ensemble_model_cache_misses_total") == 1
    assert _sample(text, "ensemble_model_cache_hits_total") == 1
    assert _sample(text, "ensemble_model_cache_loads_total") == 1
    assert _sample(text, "ensemble_model_cache_entries") == 1
    assert (_sample(text, "ensemble_model_cache_bytes") or 0) > 1000
    print("\n" + "\n".join(line for line in text.splitlines() if line.startswith("ensemble_")))


async def test_a_model_scikit_learn_serves_counts_one_cache_hit_per_prediction(api: Api) -> None:
    """The inline path looks in the cache, declines a model it cannot answer with at once
    and goes the slower way: one hit per prediction, not one for the look and one more."""
    knn = {"kind": "bagging", "params": {"n_estimators": 3}, "estimator": {"kind": "knn"}}
    version = await api.train("m", {**forest(await api.iris()), "ensemble": knn})
    assert version["inference"]["engine"] == "scikit-learn"
    rows = records(iris_frame().head(3), IRIS_FEATURES)
    for _ in range(3):
        assert (await api.predict("m", "latest", {"instances": rows})).status_code == 200
    text = await _metrics(api)
    assert _sample(text, "ensemble_model_cache_misses_total") == 1
    assert _sample(text, "ensemble_model_cache_hits_total") == 2


async def test_each_app_has_its_own_metrics(tmp_path: Path) -> None:
    async for _, first in started(make_settings(tmp_path / "one")):
        async for _, second in started(make_settings(tmp_path / "two")):
            await first.client.get("/healthz")
            await first.client.get("/healthz")
            await second.client.get("/healthz")
            healthz = {"method": "GET", "route": "/healthz", "status": "200"}
            assert _sample(await _metrics(first), "ensemble_http_requests_total", **healthz) == 2
            assert _sample(await _metrics(second), "ensemble_http_requests_total", **healthz) == 1


async def test_openmetrics_when_the_scraper_asks(api: Api) -> None:
    response = await api.client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")


async def test_a_failing_database_does_not_fail_the_scrape(
    app: FastAPI, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app.state.services.registry, "_connect", _refuse)
    text = await _metrics(api)
    assert "ensemble_training_jobs" not in text and "ensemble_model_cache_hits_total" in text


# ------------------------------------------------------------------------ request ids


async def test_every_response_has_a_request_id(api: Api) -> None:
    ids = set()
    for path in ("/healthz", "/v1/models/nope", "/v1/models/bad%20name", "/nowhere"):
        response = await api.client.get(path)
        ids.add(response.headers["x-request-id"])
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"]), path
    assert len(ids) == 4


async def test_a_valid_incoming_request_id_is_honoured(api: Api) -> None:
    sent = "trace-42.abc:DEF_9"
    response = await api.client.get("/healthz", headers={"X-Request-ID": sent})
    assert response.headers["x-request-id"] == sent
    for bad in ("has space", "x" * 129, "-leading-dash", "a\tb", "ä".encode()):
        response = await api.client.get("/healthz", headers={"X-Request-ID": bad})
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"]), bad


async def test_unexpected_error_500_has_the_request_id_and_logs_it(
    app: FastAPI, api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def boom() -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(app.state.services.registry, "list_models", boom)
    with caplog.at_level(logging.INFO):
        response = await api.client.get("/v1/models", headers={"X-Request-ID": "req-500"})
    assert response.status_code == 500 and response.headers["x-request-id"] == "req-500"
    assert response.json()["code"] == "internal" and "secret" not in response.text
    assert response.json()["request_id"] == "req-500"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and errors[0].exc_info is not None
    line = json.loads(JsonFormatter().format(errors[0]))
    assert "RuntimeError: secret internals" in line["exception"]
    access = [r for r in caplog.records if r.name == "app.access"]
    assert [(r.fields["status"], r.fields["request_id"]) for r in access] == [(500, "req-500")]  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------- logs


async def test_one_structured_line_per_request(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="app.access"):
        await api.client.get("/v1/models/nope/versions/3", headers={"X-Request-ID": "r-1"})
        await api.upload_csv("a,b\n1,SENTINEL-CELL\n")
    access = [r for r in caplog.records if r.name == "app.access"]
    assert len(access) == 2
    lines = [json.loads(JsonFormatter().format(r)) for r in access]
    first = lines[0]
    assert first["route"] == "/v1/models/{name}/versions/{ref}"
    assert first["path"] == "/v1/models/nope/versions/3"
    assert (first["method"], first["status"], first["request_id"]) == ("GET", 404, "r-1")
    assert isinstance(first["duration_ms"], float) and first["level"] == "info"
    assert first["time"].endswith("Z") and first["event"] == "request"
    assert lines[1]["status"] == 201 and len(lines[1]["request_id"]) == 32
    assert "SENTINEL" not in caplog.text  # no request bodies in logs


async def test_one_line_per_job_state_change(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    dataset = await api.iris()
    with caplog.at_level(logging.INFO, logger="app.jobs"):
        version = await api.train("logged", forest(dataset, n_estimators=3))
    events = [r.fields for r in caplog.records if r.name == "app.jobs"]  # type: ignore[attr-defined]
    assert [e["status"] for e in events] == ["queued", "running", "succeeded"]
    assert {(e["model"], e["version"]) for e in events} == {("logged", version["version"])}
    assert events[-1]["duration_s"] >= 0 and len({e["job_id"] for e in events}) == 1


def test_json_formatter_one_line_with_fields_and_request_id() -> None:
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        record = logging.LogRecord("app.x", logging.ERROR, __file__, 1, "hi %s", ("you",), None)
        record.exc_info = sys.exc_info()
    record.fields = {"event": "demo", "n": 3}
    token = REQUEST_ID.set("rid-1")
    try:
        line = JsonFormatter().format(record)
        text = TextFormatter().format(record)
    finally:
        REQUEST_ID.reset(token)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "hi you" and entry["level"] == "error"
    assert (entry["event"], entry["n"], entry["request_id"]) == ("demo", 3, "rid-1")
    assert "ValueError: bad\nthing" in entry["exception"]
    assert text.splitlines()[0].endswith("hi you event=demo n=3 request_id=rid-1")


@pytest.fixture
def clean_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    names = ("uvicorn", "uvicorn.error", "uvicorn.access")
    loggers = {n: logging.getLogger(n) for n in names}
    state = {n: (list(lg.handlers), lg.propagate, lg.disabled) for n, lg in loggers.items()}
    knobs = (logging._srcfile, logging.logThreads, logging.logMultiprocessing)
    yield
    logging._srcfile, logging.logThreads, logging.logMultiprocessing = knobs
    logging.captureWarnings(False)
    root.handlers[:], root.level = saved
    for name, (handlers, propagate, disabled) in state.items():
        loggers[name].handlers[:] = handlers
        loggers[name].propagate, loggers[name].disabled = propagate, disabled


@pytest.mark.usefixtures("clean_logging")
def test_configure_logging_replaces_uvicorns_access_log(capsys: pytest.CaptureFixture[str]) -> None:
    logging.getLogger("uvicorn.error").addHandler(logging.StreamHandler())
    configure_logging("INFO", "json")
    configure_logging("INFO", "json")  # idempotent: one handler of ours
    ours = [h for h in logging.getLogger().handlers if isinstance(h.formatter, JsonFormatter)]
    assert len(ours) == 1
    logging.getLogger("uvicorn.access").info("GET / 200")
    logging.getLogger("uvicorn.error").info("Started server process [1]")
    logging.getLogger("app.jobs").debug("not at INFO")
    lines = capsys.readouterr().err.splitlines()
    assert [json.loads(line)["message"] for line in lines] == ["Started server process [1]"]


def test_warnings_of_a_configured_process_are_json_lines() -> None:
    """numpy's overflow warning and a plain ``warnings.warn``: log lines, never raw text
    (the server process and the training workers configure their logging this way)."""
    script = (
        "import warnings\n"
        "import numpy as np\n"
        "from app.logs import configure_logging\n"
        "configure_logging('INFO', 'json')\n"
        "np.array([1e308]) * 10\n"
        "warnings.warn('plain words', UserWarning)\n"
    )
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-c", script]
    done = subprocess.run(
        command, check=False, cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(e["logger"], e["level"]) for e in lines] == [("py.warnings", "warning")] * 2
    assert "RuntimeWarning: overflow encountered in multiply" in lines[0]["message"]
    assert "UserWarning: plain words" in lines[1]["message"]


# -------------------------------------------------------------------- readiness, drain


def _refuse(**_: object) -> None:
    """A database that cannot be reached (in place of SqlRegistry._connect)."""
    raise sa.exc.OperationalError("SELECT 1", {}, Exception("unable to open database file"))


async def test_readyz_503_when_the_database_fails(
    app: FastAPI, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app.state.services.registry, "_connect", _refuse)
    response = await api.client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "not_ready"
    assert body["checks"]["artifact_store"] == "ok" and body["checks"]["job_runner"] == "ok"
    assert "unable to open database file" in body["checks"]["database"]
    assert body["detail"].startswith("not ready: database:")
    assert "artifact_store" not in body["detail"]


async def test_readyz_503_when_the_artifact_store_fails(
    app: FastAPI, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_only() -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(app.state.services.registry.store, "probe", read_only)
    response = await api.client.get("/readyz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"] == "ok" and "Read-only file system" in checks["artifact_store"]


async def test_draining_answers_waiting_requests_and_readyz(app: FastAPI, api: Api) -> None:
    dataset = await api.iris()
    waiting = asyncio.create_task(api.submit("d", forest(dataset, n_estimators=3000), wait=True))
    while not (await api.client.get("/v1/jobs", params={"status": "running"})).json():
        await asyncio.sleep(0.05)
    asked = time.monotonic()
    app.state.services.runner.drain()
    response = await waiting
    assert response.status_code == 202 and response.json()["status"] == "running"
    assert time.monotonic() - asked < 2
    ready = await api.client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["job_runner"] == "the service is shutting down"
    await api.client.post(f"/v1/jobs/{response.json()['id']}/cancel")


def test_shutdown_signal_reaches_the_callback_then_the_server() -> None:
    calls: list[str] = []

    def server(signum: int, frame: FrameType | None) -> None:
        calls.append(f"server {signum}")

    previous = signal.signal(signal.SIGTERM, server)
    try:
        with on_shutdown_signal(lambda: calls.append("drain")):
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 5
            while len(calls) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        assert calls == ["drain", f"server {int(signal.SIGTERM)}"]
        assert signal.getsignal(signal.SIGTERM) is server
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("variable", [None, "OTEL_SERVICE_NAME", "FASTAPI_OTEL_AUTO_CONFIGURE"])
def test_fastapis_own_telemetry_waits_for_an_opentelemetry_setup(
    variable: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FastAPI's per-request check for an OpenTelemetry provider runs only where an
    operator set OpenTelemetry up (issue 24: ~8 us of every request, for nothing)."""
    pytest.importorskip("fastapi.telemetry")
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("FASTAPI_OTEL_AUTO_CONFIGURE", raising=False)
    if variable is not None:
        monkeypatch.setenv(variable, "true")
    config = create_app(make_settings(tmp_path / "data"))._telemetry
    on = variable is not None
    assert (config["tracing"], config["metrics"], config["logs"]) == (on, on, on)
