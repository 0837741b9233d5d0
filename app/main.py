"""The app factory: ``create_app(settings)`` wires routes, handlers and the lifespan.

The lifespan opens the registry (which fails jobs a dead server left open), the model
cache and the job runner, and closes them in reverse order. ``python -m app`` (``make
run``) serves it with uvicorn in ``ENSEMBLE_WORKERS`` processes (:mod:`app.server.launcher`);
``uvicorn app.main:create_app --factory`` serves it in one. Settings are read from the
environment when the app is created, never at import. Created that way, without
settings, the factory also sets up the server process: JSON logs, a clean exit status
after SIGTERM, metrics shared with its sibling processes (:mod:`app.server.process`); tests pass
settings and keep their own.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

import app as app_package
from app.deps import require_unless
from app.docs import add_doc_pages
from app.edge import HeadersMiddleware, PathMiddleware
from app.fast_predict import FastPredictMiddleware
from app.front import ServiceApp
from app.jobs.executors import JobExecutor, ProcessExecutor
from app.jobs.runner import JobRunner
from app.metrics import Metrics
from app.middleware import BodyLimitMiddleware, RequestMiddleware
from app.openapi import tailor_to_settings
from app.problems import install_handlers
from app.routes import (
    datasets,
    exports,
    health,
    jobs,
    kinds,
    models,
    oip,
    predictions,
    reports,
)
from app.schemas.common import ProblemDetails
from app.schemas.datasets import DatasetRecordsIn, DatasetRowsIn, DatasetUploadForm
from app.schemas.oip import OipInferenceRequest
from app.schemas.predictions import PredictRequest
from app.schemas.training import TrainingRequest
from app.server.metrics_folder import shared_metrics_folder
from app.server.process import (
    configure_process,
    exit_zero_after_shutdown,
    launcher_gone,
    on_shutdown_signal,
    report_startup_failure,
)
from app.services.container import Services
from app.services.routing import shadow_answer
from app.services.shadows import ShadowQueue
from app.settings import Settings
from app.threads import in_thread
from ensembles.registry import ModelCache, open_registry

log = logging.getLogger("app")

DESCRIPTION = """\
Train, version and serve ensemble models (voting, bagging, pasting, random subspaces and
patches, AdaBoost, gradient boosting, forests, stacking, Breiman's pasting of small votes,
Caruana's ensemble selection) built from scikit-learn.

Upload a table, train a version of a model from an ensemble spec (a background job, on
local workers or a Dask cluster), follow the job, then predict with the version, an alias
or `latest` — over `/v1`, or the Open Inference Protocol at `/v2` for KServe and Triton
clients. Each version has a report page with plots (`/v1/models/{name}/versions/{ref}/report`).
Errors are RFC 9457 problems (`application/problem+json`) listing every problem with its
path (`/v2` answers the protocol's `{"error": ...}`).
"""
_MULTIPART_SLACK = 1024 * 1024  # form framing and the name field around an uploaded file


def executor_for(settings: Settings) -> JobExecutor:
    """Where training jobs run: a Dask cluster when ENSEMBLE_DASK_SCHEDULER is set
    (blocking: connects to it), else local worker processes."""
    if settings.dask_scheduler is None:
        return ProcessExecutor(preload=settings.preload_training)
    from app.jobs.cluster import DaskExecutor

    return DaskExecutor.open(settings.dask_scheduler)


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new service around ``settings``; without them, the server process's app: the
    settings are read from the environment now and the process is set up for serving."""
    shared: Path | None = None
    if settings is None:
        settings = Settings()
        configure_process(settings)
        shared = shared_metrics_folder()
        if shared is None and settings.worker_count > 1:
            log.warning(
                "ENSEMBLE_WORKERS=%s is for `python -m app` and `make run`; started "
                "otherwise, this process serves alone",
                settings.workers,
            )
    metrics = Metrics(shared)

    @asynccontextmanager
    async def lifespan(application: FastAPI) -> AsyncIterator[None]:
        try:
            registry = await in_thread(
                open_registry, settings.data_dir, settings.database_url, settings.store
            )
            cache = ModelCache(
                settings.cache_max_entries, settings.cache_max_bytes, metrics.cache_observer()
            )
            runner = JobRunner(registry, settings, metrics, await in_thread(executor_for, settings))
            await runner.start()
        except BaseException:
            report_startup_failure()  # the launcher of several processes exits 3
            raise
        metrics.watch(registry.count_jobs_by_status, cache)
        shadows = ShadowQueue(settings.shadow_queue)
        services = Services(settings, registry, cache, runner, metrics, shadows)
        shadows.start(partial(shadow_answer, services), registry.add_shadow_counts)
        application.state.services = services
        if not settings.api_keys:
            log.warning("no API keys configured (ENSEMBLE_API_KEYS): the service is open")
        else:
            log.info("API keys configured: %d", len(settings.api_keys))
        try:
            with on_shutdown_signal(runner.drain):
                yield
        finally:
            log.info("shutting down: stopping the training workers")
            await runner.stop()
            services.batcher.close()
            await in_thread(shadows.close)
            cache.clear()
            await in_thread(registry.close)
            metrics.close(last=launcher_gone())
            log.info("shut down")
            exit_zero_after_shutdown()

    application = ServiceApp(
        title="Ensemble Service",
        version=app_package.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_tags=[{"name": tag, "description": text} for tag, text in _TAGS.items()],
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        **_telemetry(),
    )
    application.state.settings = settings
    install_handlers(application)
    # Starlette tries routes in order: the hot route first saves a one-row prediction
    # ~40 us of matching (the docs keep their order through ``openapi_tags``).
    for router in (predictions, health, kinds, datasets, jobs, models, exports, oip, reports):
        application.include_router(router.router)
    _add_docs(application)
    max_bytes = settings.max_upload_bytes + _MULTIPART_SLACK
    application.add_middleware(BodyLimitMiddleware, max_bytes=max_bytes)
    application.add_middleware(PathMiddleware)
    # Small predictions skip FastAPI's routing and deps, and are answered at the app's
    # front door while these three layers are its outermost, in this order (app.front).
    if settings.fast_predict:
        application.add_middleware(FastPredictMiddleware, max_bytes=max_bytes)
    application.add_middleware(RequestMiddleware, metrics=metrics)
    application.add_middleware(HeadersMiddleware)  # outermost: on every answer, a 500 too
    return application


def _telemetry() -> dict[str, Any]:
    """FastAPI's own OpenTelemetry hooks (FastAPI 0.16x on) only where an operator set
    OpenTelemetry up (an ``OTEL_`` variable, or ``FASTAPI_OTEL_AUTO_CONFIGURE``): else
    its check for a configured provider, on every request, cost each ~8 us for nothing
    (issue 24, docs/performance.md)."""
    if importlib.util.find_spec("fastapi.telemetry") is None:
        return {}  # a FastAPI without them
    if os.environ.get("FASTAPI_OTEL_AUTO_CONFIGURE") or any(
        n.startswith("OTEL_") for n in os.environ
    ):
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}


_TAGS = {
    "service": "Health, readiness and metrics.",
    "kinds": "The ensemble and base estimator kinds, with their parameters.",
    "datasets": "Upload and manage training tables.",
    "jobs": "Train versions and follow training jobs.",
    "models": "Models, versions, aliases and artifacts.",
    "predictions": "Predict with a version.",
    "inference protocol": "The Open Inference Protocol (KServe V2, REST): the same models "
    'and predictions for KServe, MLServer and Triton clients; errors as `{"error": ...}`.',
    "reports": "Pages for people (the landing page, reports of models and versions) and "
    "plots for dashboards.",
}


def _add_docs(application: FastAPI) -> None:
    """/openapi.json, /docs and /redoc, open unless ENSEMBLE_OPEN_DOCS=false (then any
    key); the pages' assets are always open (see :mod:`app.docs`)."""
    guard = [Depends(require_unless("open_docs"))]

    def openapi() -> dict[str, Any]:
        if application.openapi_schema is None:
            application.openapi_schema = build_openapi(application)
        return application.openapi_schema

    application.openapi = openapi  # type: ignore[method-assign]

    @application.get("/openapi.json", include_in_schema=False, dependencies=guard)
    async def openapi_document() -> JSONResponse:
        return JSONResponse(openapi())

    add_doc_pages(application, "/openapi.json", application.title, guard)


def build_openapi(application: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the schemas of bodies parsed by hand, and the problem."""
    schema = get_openapi(
        title=application.title,
        version=application.version,
        description=application.description,
        routes=application.routes,
        tags=application.openapi_tags,
    )
    models: list[type[BaseModel]] = [
        ProblemDetails,
        TrainingRequest,
        DatasetRowsIn,
        DatasetRecordsIn,
        DatasetUploadForm,
        PredictRequest,
        OipInferenceRequest,
    ]
    _, extra = models_json_schema(
        [(m, "validation") for m in models], ref_template="#/components/schemas/{model}"
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in extra.get("$defs", {}).items():
        components.setdefault(name, definition)
    tailor_to_settings(schema, application.state.settings)
    return schema
