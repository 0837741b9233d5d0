"""Predictions of a stored version."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response

from app.bodies import ARROW_FILE, ARROW_STREAM, PARQUET, read_prediction_body
from app.deps import READ, ServicesDep
from app.problems import InvalidRequestError, count_text
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
from ensembles import Problem

router = APIRouter(tags=["predictions"])

_TABLE = "Only with an Arrow IPC or Parquet body (a JSON body has `options`)."
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
OPTIONS = ("voting", "return_proba", "return_votes", "return_std")


@router.post(
    "/v1/models/{name}/versions/{ref}/predict",
    response_model=PredictionOut,
    response_model_exclude_none=True,
    summary="Predict",
    description="Predict rows (records or columnar; `null` is missing) with a version by "
    "number, `latest` or alias. Predictions equal the stored scikit-learn model's. Options: "
    "`voting` overrides how members combine (hard or soft; kinds made of voting members "
    "only), `return_proba`, `return_votes` (votes per class and agreement), `return_std` "
    "(regression: population std of member predictions). Every per-row list has one entry "
    "per row, in input order. Bad rows are a 422 naming row and column; extra columns are "
    "ignored and listed in `warnings`; too many rows are a 413.\n\n"
    f"Batches may also be sent as a table: an Arrow IPC stream (`{ARROW_STREAM}`) or a "
    f"Parquet file (`{PARQUET}` or `application/x-parquet`) whose columns are the features "
    "(nulls are missing values), with the options as query parameters "
    "(`?return_proba=true&voting=soft`). The answer is the same JSON document, with the "
    'same 422 problems at `["instances", row, column]`; unreadable bytes are a 422 at '
    '`["body"]`. For 10,000 rows an Arrow body saves the 20-30 ms that parsing JSON '
    "numbers costs.",
    dependencies=[READ],
    openapi_extra=_BODY,
    responses=problem_responses(404, 413, 415, 422),
)
async def predict(
    name: ModelName,
    ref: VersionRef,
    request: Request,
    services: ServicesDep,
    voting: Annotated[
        Literal["hard", "soft"] | None, Query(description=f"Override how members combine. {_TABLE}")
    ] = None,
    return_proba: Annotated[bool, Query(description=f"Class probabilities. {_TABLE}")] = False,
    return_votes: Annotated[
        bool, Query(description=f"Member votes per class and agreement. {_TABLE}")
    ] = False,
    return_std: Annotated[
        bool, Query(description=f"Regression: std of member predictions. {_TABLE}")
    ] = False,
) -> Response:
    # The body is parsed and the answer serialised in worker threads (see the service):
    # a 100 000-row request is megabytes, too much work for the event loop.
    body, fmt = await read_prediction_body(request)
    if fmt is None:
        given = [key for key in OPTIONS if key in request.query_params]
        if given:
            msg = 'with a JSON body, send the options in its "options" member'
            problems = [Problem(("query", key), msg) for key in given]
            raise InvalidRequestError(count_text(len(problems)), problems)
        content = await predict_version(services, name, ref, body)
    else:
        options = PredictOptionsIn(
            voting=voting,
            return_proba=return_proba,
            return_votes=return_votes,
            return_std=return_std,
        )
        content = await predict_table(services, name, ref, body, fmt, options)
    return Response(content, media_type="application/json")
