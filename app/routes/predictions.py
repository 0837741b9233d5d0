"""Predictions of a stored version."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from starlette.background import BackgroundTask
from starlette.datastructures import QueryParams

from app.bodies import ARROW_FILE, ARROW_STREAM, PARQUET, OrjsonRoute, read_prediction_body
from app.deps import READ, ServicesDep
from app.problems import InvalidRequestError, count_text, validation_problems
from app.routes import ModelName, VersionRef
from app.schemas.common import problem_responses
from app.schemas.predictions import (
    COLUMNAR_EXAMPLE,
    PREDICT_EXAMPLE,
    TABLE_BODY_SCHEMA,
    PredictionOut,
    PredictOptionsIn,
)
from app.services.predictions import predict_table, predict_version
from app.services.routing import ROUTING_KEY_HEADER
from ensembles import Problem

router = APIRouter(tags=["predictions"], route_class=OrjsonRoute)

_TABLE = "For an Arrow IPC or Parquet body; with a JSON body, its `options` win."
_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/PredictRequest"},
                "examples": {
                    "records": {"summary": "records", "value": PREDICT_EXAMPLE},
                    "columnar": {"summary": "columnar", "value": COLUMNAR_EXAMPLE},
                },
            },
            **{
                media: {"schema": TABLE_BODY_SCHEMA}
                for media in (ARROW_STREAM, ARROW_FILE, PARQUET, "application/x-parquet")
            },
        },
    }
}
OPTIONS = ("voting", "return_proba", "return_votes", "return_std", "explain", "explain_top")


def _query_schema(field: dict[str, Any]) -> dict[str, Any]:
    """A field's schema as a query parameter's: an absent parameter is its null."""
    schema = {k: v for k, v in field.items() if k != "description"}
    options = [o for o in schema.pop("anyOf", []) if o.get("type") != "null"]
    return {**schema, **options[0]} if len(options) == 1 else schema


# The options of table bodies are read from the query string by hand, not declared as
# FastAPI parameters: resolving four query parameters cost every JSON request ~60 us.
# They are documented here from the same model, so the document and the parsing agree.
_OPTION_FIELDS = PredictOptionsIn.model_json_schema()["properties"]
_BODY["parameters"] = [
    {
        "name": key,
        "in": "query",
        "required": False,
        "description": f"{_OPTION_FIELDS[key].get('description', '')} {_TABLE}",
        "schema": _query_schema(_OPTION_FIELDS[key]),
    }
    for key in OPTIONS
]


@router.post(
    "/v1/models/{name}/versions/{ref}/predict",
    response_model=PredictionOut,
    response_model_exclude_none=True,
    summary="Predict",
    description="Predict rows (records or columnar; `null` is missing) with a version by "
    "number, `latest` or alias. Predictions equal the stored scikit-learn model's. Options: "
    "`voting` overrides how members combine (hard or soft; kinds made of voting members "
    "only), `return_proba`, `return_votes` (members' votes per class, each member counted "
    "once; `weighted_votes` with the weighted tallies for weighted models; `agreement`, the "
    "weighted share of the predicted class), `return_std` (regression: population std of "
    "member predictions), `explain` (per-row contributions of each input column, "
    "docs/explanations.md; at most ENSEMBLE_MAX_EXPLAIN_ROWS rows, more are a 413) with "
    "`explain_top`. Every per-row list has one entry per row, in input order. Bad rows "
    "are a 422 naming row and column; extra columns, and categories never seen in training "
    "(encoded as unknown), are listed in `warnings`; too many rows are a 413.\n\n"
    f"Batches may also be sent as a table: an Arrow IPC stream (`{ARROW_STREAM}`) or a "
    f"Parquet file (`{PARQUET}` or `application/x-parquet`) whose columns are the features "
    "(nulls are missing values), with the options as query parameters "
    "(`?return_proba=true&voting=soft`). The answer is the same JSON document, with the "
    'same 422 problems at `["instances", row, column]`; unreadable bytes are a 422 at '
    '`["body"]`. For 10,000 rows an Arrow body saves the 20-30 ms that parsing JSON '
    "numbers costs.",
    dependencies=[READ],
    openapi_extra=_BODY,
    responses=problem_responses(404, 413, 415, 422, 501),
)
async def predict(
    name: ModelName, ref: VersionRef, request: Request, services: ServicesDep
) -> Response:
    # Options come in the query string (tables) or the JSON body's `options`, which win.
    # The body is parsed and the answer serialised in worker threads (see the service):
    # a 100 000-row request is megabytes, too much work for the event loop.
    # A weighted alias picks its version by the routing key; a shadow's rows are queued
    # once the answer is sent.
    body, fmt = await read_prediction_body(request)
    given = _query_options(request)
    key = request.headers.get(ROUTING_KEY_HEADER)
    if fmt is None:
        answer = await predict_version(services, name, ref, body, given, key)
    else:
        options = given or PredictOptionsIn()
        answer = await predict_table(services, name, ref, body, fmt, options, key)
    shadow = answer.shadow
    later = None if shadow is None else BackgroundTask(services.shadows.offer_later, shadow)
    return Response(answer.content, media_type="application/json", background=later)


def _query_options(request: Request) -> PredictOptionsIn | None:
    return query_options(request.query_params)


def query_options(query: QueryParams) -> PredictOptionsIn | None:
    """The options given in the query string (only the known names are read), or None
    (the fast path, :mod:`app.fast_predict`, reads them with this too)."""
    if not query:
        return None
    given = {key: query[key] for key in OPTIONS if key in query}
    try:
        return PredictOptionsIn.model_validate(given)
    except ValidationError as exc:
        problems = [Problem(("query", *p.loc), p.msg) for p in validation_problems(exc.errors())]
        raise InvalidRequestError(count_text(len(problems)), problems) from None
