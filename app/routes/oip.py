"""The Open Inference Protocol (KServe V2, REST) next to ``/v1``: the data plane that
KServe, MLServer and Triton clients speak, over the same models, versions, aliases and keys.

Thin, as every router: the adapter (:mod:`app.services.oip`) turns tensors into the one
inference path's rows and its prediction back into tensors.  Errors take the protocol's
shape, ``{"error": "..."}`` (not RFC 9457 problems, which its clients cannot read): every
error raised while a route of this router runs, its dependencies' too (a missing key, a
path parameter out of pattern) and an unexpected one (a 500, logged), is caught by
:class:`OipRoute` and re-shaped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.bodies import OrjsonRoute
from app.deps import READ, RegistryDep, RunnerDep, ServicesDep
from app.problems import status_of
from app.routes import ModelName
from app.schemas.models import VERSION_REF
from app.schemas.oip import (
    InferenceResponse,
    ModelMetadata,
    ModelReady,
    OipError,
    ServerLive,
    ServerMetadata,
    ServerReady,
)
from app.services import oip
from app.services.container import Services
from app.services.routing import ROUTING_KEY_HEADER
from app.tensors import HEADER_LENGTH, TensorError
from app.threads import in_thread
from ensembles import EnsembleError

OipVersion = Annotated[
    str,
    Path(
        pattern=VERSION_REF,
        description="A version number, `latest` (the highest version) or an alias.",
        examples=["3", "latest", "production"],
    ),
]
LATEST: Final = "latest"
log = logging.getLogger(__name__)
_UNEXPECTED: Final = "an unexpected error occurred; it has been logged"
# Statuses of the protocol: a request the model cannot take is a 400 (not 422 or 415).
_AS_BAD_REQUEST: Final = frozenset({415, 422})


def error_status(exc: Exception) -> int:
    if isinstance(exc, TensorError | RequestValidationError):
        return 400
    assert isinstance(exc, EnsembleError)
    status = status_of(exc.code)
    return 400 if status in _AS_BAD_REQUEST else status


def error_message(exc: Exception) -> str:
    if isinstance(exc, RequestValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first.get('msg', 'invalid')}"
    if isinstance(exc, EnsembleError):
        return exc.detail
    return str(exc)


def error_response(exc: Exception) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="ensemble-service"'} if _is_401(exc) else None
    return JSONResponse({"error": error_message(exc)}, error_status(exc), headers=headers)


def _is_401(exc: Exception) -> bool:
    return isinstance(exc, EnsembleError) and exc.code == "unauthenticated"


class OipRoute(OrjsonRoute):
    """A route whose errors are the protocol's ``{"error": ...}``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except (TensorError, EnsembleError, RequestValidationError) as exc:
                if isinstance(exc, EnsembleError) and status_of(exc.code) >= 500:
                    log.error(
                        "%s %s failed: %s (%s)", request.method, request.url.path, exc, exc.code
                    )
                return error_response(exc)
            except StarletteHTTPException as exc:
                body = {"error": str(exc.detail)}
                return JSONResponse(body, exc.status_code, headers=exc.headers)
            except Exception:  # the protocol's clients read {"error"}, a 500 included
                log.exception("unhandled error in %s %s", request.method, request.url.path)
                return JSONResponse({"error": _UNEXPECTED}, 500)

        return handle


router = APIRouter(tags=["inference protocol"], route_class=OipRoute, dependencies=[READ])


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the protocol's error bodies."""
    texts = {
        400: "Bad request: the message names the tensor or field.",
        401: "No or unknown API key (only when API keys are configured).",
        403: "The API key's role does not allow this request.",
        404: "No such model or version.",
        413: "More rows than ENSEMBLE_MAX_PREDICT_ROWS (with explain: ENSEMBLE_MAX_EXPLAIN_ROWS).",
        501: "explain without the optional 'explain' extra installed.",
        500: "A stored artifact failed its checksum, or an unexpected error (logged).",
        503: "Storage unavailable.",
    }
    return {
        status: {"description": texts[status], "model": OipError}
        for status in (401, 403, *statuses, 500, 503)
    }


@router.get(
    "/v2",
    response_model=ServerMetadata,
    summary="Server metadata",
    description="The server's name, version and protocol extensions.",
    responses=_errors(),
)
async def server_metadata() -> dict[str, Any]:
    return oip.server_metadata()


@router.get(
    "/v2/health/live",
    response_model=ServerLive,
    summary="Server live",
    description='200 `{"live": true}` while the process serves requests.',
    responses=_errors(),
)
async def server_live() -> dict[str, Any]:
    return {"live": True}


@router.get(
    "/v2/health/ready",
    response_model=ServerReady,
    summary="Server ready",
    description='200 `{"ready": true}` when `/readyz` would be 200; else 503 `{"ready": false}`.',
    responses={**_errors(), 503: {"description": "Not ready.", "model": ServerReady}},
)
async def server_ready(registry: RegistryDep, runner: RunnerDep) -> Response:
    checks = await in_thread(registry.check)
    ready = all(v == "ok" for v in checks.values()) and runner.readiness() == "ok"
    return JSONResponse({"ready": ready}, status_code=200 if ready else 503)


_METADATA: dict[str, Any] = {
    "response_model": ModelMetadata,
    "summary": "Model metadata",
    "description": "The model's versions and, for the version named (`latest` without one), "
    "its inputs (one per feature, `FP64`/`INT64`/`BOOL`/`BYTES`, shape `[-1]`) and every "
    "output it can give, with datatypes and shapes.",
    "responses": _errors(400, 404),
}


@router.get("/v2/models/{name}", **_METADATA)
async def model_metadata(name: ModelName, services: ServicesDep) -> dict[str, Any]:
    return await oip.model_metadata(services, name, LATEST)


@router.get("/v2/models/{name}/versions/{version}", **_METADATA)
async def version_metadata(
    name: ModelName, version: OipVersion, services: ServicesDep
) -> dict[str, Any]:
    return await oip.model_metadata(services, name, version)


_READY: dict[str, Any] = {
    "response_model": ModelReady,
    "summary": "Model ready",
    "description": "200 when the version exists and is loaded to answer (it is loaded "
    "now if it was not); 404 for an unknown model or version.",
    "responses": _errors(400, 404),
}


@router.get("/v2/models/{name}/ready", **_READY)
async def model_ready(name: ModelName, services: ServicesDep) -> dict[str, Any]:
    return await oip.model_ready(services, name, LATEST)


@router.get("/v2/models/{name}/versions/{version}/ready", **_READY)
async def version_ready(
    name: ModelName, version: OipVersion, services: ServicesDep
) -> dict[str, Any]:
    return await oip.model_ready(services, name, version)


_BINARY_BODY = {
    "type": "string",
    "format": "binary",
    "description": f"{HEADER_LENGTH} bytes of JSON (the inference request) followed by the "
    "raw bytes of the inputs with a `binary_data_size` parameter, in input order.",
}
_INFER: dict[str, Any] = {
    "summary": "Infer",
    "description": "Predict rows sent as tensors: one per feature (named as the feature, "
    "shape `[n]` or `[n, 1]`; `NaN` is a missing value) or one 2-D numeric tensor "
    "`[n, n_features]` in training column order. The answers are `/v1` predict's: "
    "`predictions`, and when asked through `parameters` (`return_proba`, `return_votes`, "
    "`return_std`, `voting`) or the `outputs` list, `probabilities` `[n, n_classes]`, "
    "`votes` `[n, n_classes]` (`weighted_votes` when listed), `agreement`, `std`, with "
    "`explain` `contributions` `[n, n_classes, n_features]` (regression `[n, n_features]`) "
    "and `base_values`, `parameters.features` naming the last axis; "
    "`parameters.classes` names the columns. With the binary tensor data extension, inputs "
    f"may follow the JSON as raw bytes (header `{HEADER_LENGTH}`), and outputs are sent so "
    "when `binary_data_output` or an output's `binary_data` asks.",
    "response_model": InferenceResponse,
    "responses": {
        200: {
            "content": {
                "application/octet-stream": {
                    "schema": {
                        "type": "string",
                        "format": "binary",
                        "description": f"With binary outputs: {HEADER_LENGTH} bytes of "
                        "JSON, then each binary output's bytes.",
                    }
                }
            }
        },
        **_errors(400, 404, 413, 501),
    },
    "openapi_extra": {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"$ref": "#/components/schemas/OipInferenceRequest"}
                },
                "application/octet-stream": {"schema": _BINARY_BODY},
            },
        },
        "parameters": [
            {
                "name": HEADER_LENGTH,
                "in": "header",
                "required": False,
                "description": "Binary tensor data extension: the length of the JSON part.",
                "schema": {"type": "integer", "minimum": 0},
            }
        ],
    },
}


@router.post("/v2/models/{name}/infer", **_INFER)
async def infer(name: ModelName, request: Request, services: ServicesDep) -> Response:
    return await _infer(services, name, LATEST, request)


@router.post("/v2/models/{name}/versions/{version}/infer", **_INFER)
async def version_infer(
    name: ModelName, version: OipVersion, request: Request, services: ServicesDep
) -> Response:
    return await _infer(services, name, version, request)


async def _infer(services: Services, name: str, ref: str, request: Request) -> Response:
    body = await request.body()
    key = request.headers.get(ROUTING_KEY_HEADER)
    content, json_length, shadow = await oip.infer(
        services, name, ref, body, request.headers.get(HEADER_LENGTH), key
    )
    later = None if shadow is None else BackgroundTask(services.shadows.offer_later, shadow)
    if json_length is None:
        return Response(content, media_type="application/json", background=later)
    return Response(
        content,
        media_type="application/octet-stream",
        headers={HEADER_LENGTH: str(json_length)},
        background=later,
    )
