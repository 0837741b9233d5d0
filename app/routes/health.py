"""Liveness, readiness and metrics: open endpoints for the platform around the service."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from app.bodies import OrjsonRoute
from app.deps import BearerDep, MetricsDep, RegistryDep, RunnerDep, may, open_unless
from app.problems import problem_body, problem_response
from app.schemas.common import problem_responses
from app.schemas.service import Health, Readiness
from app.threads import in_thread

router = APIRouter(tags=["service"], route_class=OrjsonRoute)

_METRICS_EXAMPLE = (
    "# HELP ensemble_predictions_total Prediction requests answered, by model.\n"
    "# TYPE ensemble_predictions_total counter\n"
    'ensemble_predictions_total{model="iris-clf"} 42.0\n'
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
async def readyz(registry: RegistryDep, runner: RunnerDep) -> Response:
    checks = await in_thread(registry.check)
    checks["job_runner"] = runner.readiness()
    failing = {name: reason for name, reason in checks.items() if reason != "ok"}
    if failing:
        detail = "not ready: " + "; ".join(f"{name}: {reason}" for name, reason in failing.items())
        return problem_response(problem_body("not_ready", detail, extra={"checks": checks}))
    return JSONResponse({"status": "ok", "checks": checks})


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Prometheus metrics",
    description="Prometheus text format (OpenMetrics when the scraper asks for it): "
    "`ensemble_http_requests_total` and the `ensemble_http_request_duration_seconds` "
    "histogram by method, route template and status, `ensemble_http_requests_in_progress`, "
    "`ensemble_predictions_total` and `ensemble_prediction_rows_total` by model, "
    "`ensemble_training_jobs` by status, the `ensemble_training_duration_seconds` "
    "histogram by final status, model cache hits, misses, loads, evictions, bytes and "
    "entries, and the process's CPU, memory and file descriptors. Open unless "
    "ENSEMBLE_OPEN_METRICS=false (then it needs a key of any role). With API keys "
    "configured, a scrape without a key of the `read` role gets the prediction counters "
    "summed over models, without `model` labels (as the landing page, which lists models "
    "only to a reader).",
    **open_unless("open_metrics"),
    responses={
        200: {"content": {"text/plain": {"example": _METRICS_EXAMPLE}}},
        **problem_responses(),
    },
)
async def metrics(request: Request, collected: MetricsDep, credentials: BearerDep) -> Response:
    accept = request.headers.get("accept")
    names = await may(request, credentials, "read")
    content, media_type = await in_thread(collected.exposition, accept, names=names)
    return Response(content, media_type=media_type)
