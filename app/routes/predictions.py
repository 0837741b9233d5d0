"""Predictions of a stored version."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from app.bodies import read_json_bytes
from app.deps import READ, ServicesDep
from app.routes import ModelName, VersionRef
from app.schemas.common import problem_responses
from app.schemas.predictions import COLUMNAR_EXAMPLE, PREDICT_EXAMPLE, PredictionOut
from app.services.predictions import predict_version

router = APIRouter(tags=["predictions"])

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
            }
        },
    }
}


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
    "ignored and listed in `warnings`; too many rows are a 413.",
    dependencies=[READ],
    openapi_extra=_BODY,
    responses=problem_responses(404, 413, 415, 422),
)
async def predict(
    name: ModelName, ref: VersionRef, request: Request, services: ServicesDep
) -> Response:
    # The body is parsed and the answer serialised in worker threads (see the service):
    # a 100 000-row request is megabytes of JSON, too much work for the event loop.
    body = await read_json_bytes(request)
    content = await predict_version(services, name, ref, body)
    return Response(content, media_type="application/json")
