"""Shapes shared by every resource: problems (RFC 9457) and their documented responses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.problems import PROBLEM_MEDIA_TYPE, problem_body, problem_type
from ensembles import Problem


class ProblemItem(BaseModel):
    """One thing wrong with a request, and where: a path into the request body
    (``["ensemble", "estimators", 1, "params", "n_estimators"]``), or ``["path", name]``
    / ``["query", name]`` for URL parameters."""

    loc: list[str | int] = Field(description="Path of the field or cell the message is about.")
    msg: str = Field(description="What is wrong, in the user's terms.")


class ProblemDetails(BaseModel):
    """An RFC 9457 problem: every error response and every failed job's ``error``."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                problem_body(
                    "invalid_spec",
                    "1 problem in the request",
                    problems=[
                        Problem(
                            ("ensemble", "estimators", 1, "params", "n_estimators"),
                            "must be an integer between 1 and 5000; got 0",
                        )
                    ],
                )
            ]
        },
    )

    type: str = Field(description="URI reference naming the kind of problem.")
    title: str = Field(description="Short summary of the kind of problem.")
    status: int = Field(description="The HTTP status of this kind of problem.")
    detail: str | None = Field(default=None, description="What happened this time.")
    instance: str | None = Field(default=None, description="The request path it concerns.")
    code: str = Field(description="Stable machine-readable reason (e.g. invalid_spec).")
    request_id: str | None = Field(
        default=None,
        description="The request's id (also in its X-Request-ID header and log lines): "
        "quote it when reporting a problem.",
    )
    errors: list[ProblemItem] | None = Field(
        default=None, description="Every problem found, each with its location."
    )


_EXAMPLE_DETAIL: dict[str, tuple[str, str]] = {
    "400": ("invalid_request", "the request is malformed"),
    "401": ("unauthenticated", "send Authorization: Bearer <key>"),
    "403": ("forbidden", "the key's role 'read' may not do this; it needs 'train'"),
    "404": ("not_found", "model 'iris-clf' not found"),
    "406": ("not_acceptable", "this plot is served as image/svg+xml or image/png"),
    "409": ("conflict", "version 2 of model 'iris-clf' is the target of alias 'production'"),
    "413": ("too_large", "the request body is over the limit of 104857600 bytes"),
    "415": ("unsupported_format", "send CSV, Parquet or JSON Lines"),
    "422": ("invalid_request", "1 problem in the request"),
    "429": ("queue_full", "100 jobs are queued; retry when some have finished"),
    "500": ("internal", "an unexpected error occurred; it has been logged"),
    "501": ("export_unavailable", "the onnx export needs the optional packages skl2onnx"),
    "503": ("storage", "registry database error: disk I/O error"),
}

_DESCRIPTIONS = {
    "400": "Malformed request (e.g. a multipart body without a boundary).",
    "401": "No or unknown API key (only when API keys are configured).",
    "403": "The API key's role does not allow this request.",
    "404": "Not found.",
    "406": "None of the media types in `Accept` is served here.",
    "409": "Conflict with the current state.",
    "413": "Over a configured size limit.",
    "415": "Unsupported media type.",
    "422": "Invalid request: every problem with its location in `errors`.",
    "429": "Too many queued training jobs.",
    "500": "Unexpected server error (never with a stack trace).",
    "501": "A feature whose optional libraries are not installed on this server.",
    "503": "Storage unavailable.",
}


def problem_responses(*statuses: int, auth: bool = True) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for error statuses, as ``application/problem+json``."""
    wanted = [*((401, 403) if auth else ()), *statuses, 500]
    out: dict[int | str, dict[str, Any]] = {}
    for status in sorted(set(wanted)):
        code, detail = _EXAMPLE_DETAIL[str(status)]
        problems = [Problem(("target",), "no column 'species' in the table")]
        example = problem_body(code, detail, problems=problems if status == 422 else ())
        if status == 422:
            example["title"] = problem_type("invalid_request").title
        out[status] = {
            "description": _DESCRIPTIONS[str(status)],
            "content": {
                PROBLEM_MEDIA_TYPE: {
                    "schema": {"$ref": "#/components/schemas/ProblemDetails"},
                    "example": example,
                }
            },
        }
    return out
