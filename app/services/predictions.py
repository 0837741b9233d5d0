"""Predictions: resolve the version, get the model through the cache, predict in a thread."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import ValidationError

from app.deps import Services
from app.problems import InvalidRequestError, count_text, validation_problems
from app.schemas.predictions import PredictionOut, PredictRequest
from app.services import in_thread
from ensembles import ModelSignature, PredictOptions, predict, rows_to_frame
from ensembles.errors import IntegrityError
from ensembles.registry import VersionRecord


async def predict_version(services: Services, name: str, ref: str, body: bytes) -> bytes:
    """The JSON answer to the prediction request ``body`` (parsed in a thread)."""
    request = await in_thread(_parse, body)
    answer = await _answer(services, name, ref, request)
    return await in_thread(_to_json, answer)


def _to_json(answer: PredictionOut) -> bytes:
    return answer.model_dump_json(exclude_none=True).encode()


def _parse(body: bytes) -> PredictRequest:
    try:
        return PredictRequest.model_validate_json(body)
    except ValidationError as exc:
        problems = validation_problems(exc.errors())
        raise InvalidRequestError(count_text(len(problems)), problems) from None


async def _answer(
    services: Services, name: str, ref: str, request: PredictRequest
) -> PredictionOut:
    registry, cache = services.registry, services.cache
    record: VersionRecord = await in_thread(registry.get_version, name, ref)
    raw_signature = record.metadata.get("signature")
    if not isinstance(raw_signature, dict):
        raise IntegrityError(f"model {name!r} version {record.version} has no stored signature")
    signature = ModelSignature.from_dict(raw_signature)
    key = (record.model, record.version, record.artifact_sha256)
    loader = functools.partial(registry.load_model, record.model, record.version)
    pipeline = await in_thread(cache.get_or_load, key, loader, record.artifact_size)
    options = PredictOptions(**request.options.model_dump())
    result, warnings = await in_thread(
        _predict,
        pipeline,
        signature,
        request.instances,
        options,
        services.settings.max_predict_rows,
    )
    services.metrics.predictions += 1
    services.metrics.prediction_rows += len(result["predictions"])
    return PredictionOut(
        model=record.model,
        version=record.version,
        task=signature.task,
        classes=None if signature.classes is None else list(signature.classes),
        **{**result, "warnings": [*warnings, *result.get("warnings", [])]},
    )


def _predict(
    pipeline: Any,
    signature: ModelSignature,
    instances: object,
    options: PredictOptions,
    max_rows: int,
) -> tuple[dict[str, Any], list[str]]:
    frame, warnings = rows_to_frame(signature, instances, max_rows)
    return predict(pipeline, signature, frame, options).as_dict(), warnings
