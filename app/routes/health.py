"""Liveness, readiness and metrics: open endpoints for the platform around the service."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from app.deps import ServicesDep, require_unless
from app.metrics import render
from app.problems import problem_body, problem_response
from app.schemas.common import problem_responses
from app.schemas.service import Health, Readiness
from app.services import in_thread

router = APIRouter(tags=["service"])

_METRICS_EXAMPLE = (
    "# HELP ensemble_predictions_total Prediction requests answered.\n"
    "# TYPE ensemble_predictions_total counter\n"
    "ensemble_predictions_total 42\n"
)


@router.get(
    "/healthz",
    response_model=Health,
    summary="Liveness",
    description='200 `{"status": "ok"}` while the process serves requests.',
    responses=problem_responses(auth=False),
)
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Readiness",
    description="200 when the registry database, the artifact store and the job runner are "
    "usable; else 503 naming each failing check in `checks` and in `detail`.",
    responses=problem_responses(503, auth=False),
)
async def readyz(services: ServicesDep) -> Response:
    checks = await in_thread(services.registry.check)
    checks["job_runner"] = "ok" if services.runner.healthy else "the job runner is not running"
    failing = {name: reason for name, reason in checks.items() if reason != "ok"}
    if failing:
        detail = "not ready: " + "; ".join(f"{name}: {reason}" for name, reason in failing.items())
        return problem_response(problem_body("not_ready", detail, extra={"checks": checks}))
    return JSONResponse({"status": "ok", "checks": checks})


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Prometheus metrics",
    description="Prometheus text format: requests and latency per route and status, "
    "predictions served, training jobs by status, model cache hits and misses. Open unless "
    "ENSEMBLE_OPEN_METRICS=false (then it needs a key of any role).",
    dependencies=[Depends(require_unless("open_metrics"))],
    responses={
        200: {"content": {"text/plain": {"example": _METRICS_EXAMPLE}}},
        **problem_responses(),
    },
)
async def metrics(services: ServicesDep) -> PlainTextResponse:
    jobs = await in_thread(services.registry.list_jobs)
    by_status: dict[str, int] = dict.fromkeys(
        ("queued", "running", "succeeded", "failed", "cancelled"), 0
    )
    for job in jobs:
        by_status[job.status] = by_status.get(job.status, 0) + 1
    cache = services.cache
    counters = {
        "hit": cache.hits,
        "miss": cache.misses,
        "load": cache.loads,
        "eviction": cache.evictions,
        "bytes": cache.bytes,
    }
    text = render(services.metrics, by_status, counters)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")
