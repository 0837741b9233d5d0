"""RFC 9457 problem details: ONE table from error codes to HTTP statuses, and the handlers.

The domain library raises :class:`ensembles.EnsembleError` subclasses with stable,
transport-free ``code``s; the few errors that exist only because of HTTP (keys, queue,
request bodies) are subclasses defined here with codes of their own. Every error
response, job errors included, is shaped by :func:`problem_body` from the same table.
Nothing here ever sends a stack trace to a client.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.logs import REQUEST_ID
from ensembles import EnsembleError, Problem

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE: Final = "application/problem+json"
PROBLEM_TYPE_BASE: Final = "/problems/"


@dataclass(frozen=True)
class ProblemType:
    """How one error code appears over HTTP."""

    status: int
    slug: str  # the last segment of the problem's ``type`` URI
    title: str
    description: str


_VALIDATION = "validation"

# The one table: error code -> HTTP status, problem type and default title.
PROBLEM_TYPES: Final[Mapping[str, ProblemType]] = {
    "invalid_request": ProblemType(
        422, _VALIDATION, "Invalid request", "The request does not match its schema."
    ),
    "invalid_spec": ProblemType(
        422, _VALIDATION, "Invalid training request", "The training request cannot be trained."
    ),
    "invalid_data": ProblemType(
        422, _VALIDATION, "Invalid table", "A table or its target/feature columns are unusable."
    ),
    "invalid_input": ProblemType(
        422, _VALIDATION, "Invalid prediction request", "Rows or options the model cannot take."
    ),
    "unsupported_format": ProblemType(
        415, "unsupported-format", "Unsupported table format", "Send CSV, Parquet or JSON Lines."
    ),
    "unsupported_media_type": ProblemType(
        415, "unsupported-format", "Unsupported media type", "The body has the wrong type."
    ),
    "not_acceptable": ProblemType(
        406, "not-acceptable", "Not acceptable", "None of the media types asked for is served."
    ),
    "too_large": ProblemType(
        413, "too-large", "Input too large", "A body, table or request over a configured limit."
    ),
    "not_found": ProblemType(
        404, "not-found", "Not found", "No dataset, model, version, alias or job of that name."
    ),
    "method_not_allowed": ProblemType(
        405, "method-not-allowed", "Method not allowed", "The path exists; the method does not."
    ),
    "conflict": ProblemType(
        409, "conflict", "Conflict", "The request contradicts the current state."
    ),
    "export_failed": ProblemType(
        409,
        "export-failed",
        "Model cannot be exported in this format",
        "A part of the model has no converter, or the converted model answers differently.",
    ),
    # 501, not 503: the server lacks the feature until someone installs it (the extra
    # `export`); retrying, which a 503 invites, would not help.
    "export_unavailable": ProblemType(
        501, "export-unavailable", "Export format not installed", "Install the extra `export`."
    ),
    # The same reasoning as exports: the extra `explain` (shap) must be installed.
    "explain_unavailable": ProblemType(
        501, "explain-unavailable", "Explanations not installed", "Install the extra `explain`."
    ),
    "explain_too_slow": ProblemType(
        422,
        "explain-too-slow",
        "Explanation over its time budget",
        "The explanation would take longer than ENSEMBLE_EXPLAIN_SECONDS: send fewer rows.",
    ),
    "cancelled": ProblemType(
        409, "cancelled", "Training cancelled", "The training job was cancelled."
    ),
    "unauthenticated": ProblemType(
        401, "unauthenticated", "Authentication required", "Send Authorization: Bearer <key>."
    ),
    "forbidden": ProblemType(
        403, "forbidden", "Not allowed", "The key's role does not allow this request."
    ),
    "queue_full": ProblemType(
        429, "queue-full", "Too many training jobs", "The training queue is full; retry later."
    ),
    "training_failed": ProblemType(
        422, "training-failed", "Training failed", "Fitting failed on the data or parameters."
    ),
    "timeout": ProblemType(
        422,
        "training-timeout",
        "Training took too long",
        "The job ran longer than the service's job timeout and was stopped.",
    ),
    # A damaged artifact is the service's fault, not a state the client can resolve, so it
    # is a 500 (with a clear detail) rather than a 409.
    "integrity": ProblemType(
        500, "integrity", "Stored artifact is damaged", "A stored file failed its checksum."
    ),
    "worker_crashed": ProblemType(
        500,
        "worker-crashed",
        "Training process died",
        "The training worker process ended abnormally (killed, out of memory, crash).",
    ),
    "internal": ProblemType(
        500, "internal", "Internal server error", "An unexpected error; it has been logged."
    ),
    "storage": ProblemType(
        503, "storage", "Storage unavailable", "The registry database or file store failed."
    ),
    "interrupted": ProblemType(
        503, "interrupted", "Training interrupted", "The service stopped while the job was open."
    ),
    "not_ready": ProblemType(503, "not-ready", "Service not ready", "A readiness check failed."),
}


def problem_type(code: str) -> ProblemType:
    return PROBLEM_TYPES.get(code, PROBLEM_TYPES["internal"])


def status_of(code: str) -> int:
    return problem_type(code).status


# --------------------------------------------------------------------- errors of app/


class ServiceError(EnsembleError):
    """Errors that exist because of HTTP; they share the library's root and code table."""


class InvalidRequestError(ServiceError):
    code = "invalid_request"
    title = "Invalid request"


class UnsupportedMediaTypeError(ServiceError):
    code = "unsupported_media_type"
    title = "Unsupported media type"


class NotAcceptableError(ServiceError):
    code = "not_acceptable"
    title = "Not acceptable"


class BodyTooLargeError(ServiceError):
    code = "too_large"
    title = "Request body too large"


class UnauthenticatedError(ServiceError):
    code = "unauthenticated"
    title = "Authentication required"


class ForbiddenError(ServiceError):
    code = "forbidden"
    title = "Not allowed"


# --------------------------------------------------------------------------- bodies


def problem_body(
    code: str,
    detail: str | None,
    *,
    title: str | None = None,
    problems: Sequence[Problem] = (),
    instance: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON of a problem: RFC 9457 members plus ``code`` and ``errors``."""
    kind = problem_type(code)
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + kind.slug,
        "title": title or kind.title,
        "status": kind.status,
        "detail": detail,
        "code": code,
    }
    if instance is not None:
        body["instance"] = instance
    if problems:
        body["errors"] = [p.as_dict() for p in problems]
    if extra:
        body.update(extra)
    return body


def job_error_body(error: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A job's stored ``{code, title, detail}`` completed into a full problem object."""
    if error is None:
        return None
    code = str(error.get("code") or "internal")
    problems = [Problem(tuple(e["loc"]), str(e["msg"])) for e in error.get("errors") or []]
    return problem_body(
        code,
        str(error.get("detail") or ""),
        title=str(error.get("title") or problem_type(code).title),
        problems=problems,
    )


OIP_PREFIX: Final = "/v2"


def is_oip(path: str) -> bool:
    """Under the Open Inference Protocol, whose clients read ``{"error": ...}`` only."""
    return path == OIP_PREFIX or path.startswith(OIP_PREFIX + "/")


def problem_response(
    body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The problem as a response; inside a request it carries the request's id, the one
    its log lines have, for the caller to quote (a 500 says nothing else). Under ``/v2`` the
    same answer in the protocol's shape, ``{"error": detail}``, whoever raised it (an
    unknown path, a method, a body limit): the protocol has no other error document."""
    instance = body.get("instance")
    if isinstance(instance, str) and is_oip(instance):
        errors = body.get("errors") or []
        where = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errors
        )
        detail = f"{body['detail']}: {where}" if where else str(body["detail"])
        return JSONResponse({"error": detail}, status_code=int(body["status"]), headers=headers)
    content = dict(body)
    request_id = REQUEST_ID.get()
    if request_id is not None:
        content.setdefault("request_id", request_id)
    return JSONResponse(
        content, status_code=int(body["status"]), media_type=PROBLEM_MEDIA_TYPE, headers=headers
    )


def error_response(exc: EnsembleError, instance: str | None = None) -> JSONResponse:
    body = problem_body(
        exc.code, exc.detail, title=exc.title, problems=exc.problems, instance=instance
    )
    headers: dict[str, str] = {}
    if exc.code == "unauthenticated":
        headers["WWW-Authenticate"] = 'Bearer realm="ensemble-service"'
    elif exc.code in ("storage", "queue_full"):
        headers["Retry-After"] = "5"
    return problem_response(body, headers)


def _location(error: Mapping[str, Any]) -> tuple[str | int, ...]:
    """Body errors read as paths into the body (``ensemble.estimators.1...``); a body that
    is not JSON at all is a problem at ``("body",)``, wherever the parser stopped."""
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "json_invalid":
        return ("body",)
    inside = loc[1:] if loc and loc[0] == "body" else loc
    return inside or ("body",)


def validation_problems(errors: Sequence[Any]) -> list[Problem]:
    return [Problem(_location(e), str(e.get("msg", ""))) for e in errors]


def count_text(n: int) -> str:
    return f"{n} problem{'s' if n != 1 else ''} in the request"


# ------------------------------------------------------------------------- handlers


async def _ensemble_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EnsembleError)
    if status_of(exc.code) >= 500:
        log.error("%s %s failed: %s (%s)", request.method, request.url.path, exc.detail, exc.code)
    return error_response(exc, instance=request.url.path)


async def _request_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = validation_problems(exc.errors())
    body = problem_body(
        "invalid_request", count_text(len(problems)), problems=problems, instance=request.url.path
    )
    return problem_response(body)


_METHODS: Final = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route takes at the request's path, and OPTIONS.

    Starlette's 405 names the methods of the first route that matched the path only, so a
    path served by two routes (GET and DELETE /v1/models/{name}) advertised one of them.
    Each method is tried against the routes (``matches`` is the routes' public interface;
    FastAPI nests included routers), which only a 405 or an OPTIONS request pays for.
    HEAD goes with GET (:class:`app.edge.PathMiddleware` answers it).
    """
    routes = request.app.router.routes
    allowed = [
        method
        for method in _METHODS
        if any(r.matches({**request.scope, "method": method})[0] == Match.FULL for r in routes)
    ]
    if "GET" in allowed and "HEAD" not in allowed:
        allowed.insert(allowed.index("GET") + 1, "HEAD")
    return [*allowed, "OPTIONS"]


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        allow = ", ".join(allowed_methods(request))
        if request.method == "OPTIONS":  # RFC 9110: what the resource takes, no content
            return Response(status_code=204, headers={"Allow": allow})
        detail = f"{request.method} is not allowed here; the path takes {allow}"
        body = problem_body("method_not_allowed", detail, instance=request.url.path)
        return problem_response(body, {"Allow": allow})
    codes = {
        404: "not_found",
        405: "method_not_allowed",
        413: "too_large",
        415: "unsupported_media_type",
    }
    code = codes.get(exc.status_code)
    if code is None:
        code = "invalid_request" if exc.status_code < 500 else "internal"
    detail = str(exc.detail)
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no such path: {request.url.path}"
    body = problem_body(code, detail, instance=request.url.path)
    body["status"] = exc.status_code
    return problem_response(body, exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error in %s %s", request.method, request.url.path)
    body = problem_body(
        "internal", "an unexpected error occurred; it has been logged", instance=request.url.path
    )
    return problem_response(body)


def install_handlers(app: FastAPI) -> None:
    app.add_exception_handler(EnsembleError, _ensemble_error)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(Exception, _unexpected)
