"""Predictions: from body bytes to answer bytes in one go, on the event loop when that is
cheaper than a thread hand-off, else in one trip to a worker thread.

Parse (orjson for JSON; Arrow IPC or Parquet bodies are read by pyarrow without copying
the numbers), resolve the version, get the servable model from the cache (loaded,
checked and its compiled engine re-created only on a miss), check the rows straight into
numpy arrays, predict with the faster engine for the request's size, and write the answer
(orjson, numpy arrays written as they are).  On a cache hit nothing is read from disk:
the version reference is resolved from memory while the registry database is unchanged
(``SqlRegistry.resolve_version``) and the model is already loaded.

Where it runs, measured with ``make bench`` (random forests, 2 cores): a small JSON body
(``INLINE_MAX_BYTES``, a few dozen rows) whose version and model are already in memory
and that only native engines answer (GTIL and numpy members: tens of microseconds of
CPU; ``Servable.native_for``) is answered on the event loop itself: when measured, one
row at p50 0.9 ms instead of 1.3 ms through a thread, 16 clients 1,170 instead of 560
requests/s.  Everything else (a load, a database read, any scikit-learn call, votes and
spread, big bodies, every table body) goes to a worker thread, once, so the loop never
waits on I/O or on more than a fraction of a millisecond of CPU.

Where the time of a 10,000-row request goes (random forest, 30 columns, in process):
columnar JSON spends 10-12 ms in orjson, 7-8 ms checking its lists into one float64 array
and 3 ms freeing them, next to 26 ms of scikit-learn; an Arrow IPC body of the same rows
is read and checked in 0.3 ms.  Writing the answer (numpy arrays straight to orjson)
takes about 1 ms, so answering in Arrow as well would save little.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from app.bodies import TableFormat, read_table_body
from app.problems import InvalidRequestError, count_text, validation_problems
from app.schemas.predictions import PredictOptionsIn, PredictRequest
from app.services.container import Services
from app.threads import in_thread
from ensembles import ModelSignature, PredictOptions, predict_arrays, rows_to_columns
from ensembles.batches import table_to_columns
from ensembles.errors import IntegrityError, PredictionInputError, Problem
from ensembles.prediction import Columns
from ensembles.registry import VersionRecord
from ensembles.serving import Servable, prepare

INLINE_MAX_BYTES = 8 * 1024  # bodies up to this size may be answered on the event loop


@dataclass(frozen=True)
class _Loaded:
    """A cache entry: the version's servable model and its signature, parsed once."""

    servable: Servable
    signature: ModelSignature


async def predict_version(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    query_options: PredictOptionsIn | None = None,
) -> bytes:
    """The JSON answer to the prediction request ``body``; ``query_options`` are the
    options given in the query string, under those of the body."""
    if len(body) <= INLINE_MAX_BYTES:
        request = _parse(body, query_options)
        inline = _answer_inline(services, name, ref, request)
        if inline is not None:
            return inline
        return await in_thread(_answer, services, name, ref, request)
    return await in_thread(answer, services, name, ref, body, query_options)


def answer(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    query_options: PredictOptionsIn | None = None,
) -> bytes:
    """The whole prediction request, synchronously (blocking: call it from a worker thread)."""
    return _answer(services, name, ref, _parse(body, query_options))


async def predict_table(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    fmt: TableFormat,
    options: PredictOptionsIn,
) -> bytes:
    """The JSON answer for the rows of an Arrow IPC or Parquet body (always in a thread)."""
    return await in_thread(answer_table, services, name, ref, body, fmt, options)


def answer_table(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    fmt: TableFormat,
    options: PredictOptionsIn,
) -> bytes:
    """A table body's prediction request, synchronously: the table is read first (a 422 or
    413 for the body comes before a 404, as for JSON bodies), then checked against the
    version's signature column by column, straight into numpy."""
    max_rows = services.settings.max_predict_rows
    table = read_table_body(body, fmt, max_rows)
    record = services.registry.resolve_version(name, ref)
    loaded = _load(services, record)
    columns, warnings = table_to_columns(loaded.signature, table, max_rows)
    try:
        return _write(services, record, loaded, columns, warnings, options)
    except PredictionInputError as exc:
        raise _in_query(exc) from None


def _in_query(exc: PredictionInputError) -> PredictionInputError:
    """Options of a table body came as query parameters: problems name those."""
    problems = [
        Problem(("query", *p.loc[1:]), p.msg) if p.loc[:1] == ("options",) else p
        for p in exc.problems
    ]
    if problems == list(exc.problems):
        return exc
    plural = "s" if len(problems) != 1 else ""
    return PredictionInputError(f"{len(problems)} problem{plural} in the query", problems)


def _answer_inline(
    services: Services, name: str, ref: str, request: PredictRequest
) -> bytes | None:
    """The answer if it needs no I/O and only native engines (GTIL, numpy members: tens of
    microseconds of CPU for a few rows), else None: the request then goes to a thread."""
    options = request.options
    if options.voting is not None or options.return_votes or options.return_std:
        return None  # scikit-learn's members answer these
    record = services.registry.resolved_version(name, ref)
    if record is None:
        return None
    loaded = services.cache.peek(_key(record))
    if not isinstance(loaded, _Loaded):
        return None
    instances = request.instances
    rows = instances.get("data") if isinstance(instances, dict) else instances
    if not isinstance(rows, list) or not loaded.servable.native_for(len(rows)):
        return None
    return _respond(services, record, loaded, request)


def _answer(services: Services, name: str, ref: str, request: PredictRequest) -> bytes:
    record: VersionRecord = services.registry.resolve_version(name, ref)
    return _respond(services, record, _load(services, record), request)


def _respond(
    services: Services, record: VersionRecord, loaded: _Loaded, request: PredictRequest
) -> bytes:
    columns, warnings = rows_to_columns(
        loaded.signature, request.instances, services.settings.max_predict_rows
    )
    return _write(services, record, loaded, columns, warnings, request.options)


def _write(
    services: Services,
    record: VersionRecord,
    loaded: _Loaded,
    columns: Columns,
    warnings: list[str],
    options: PredictOptionsIn,
) -> bytes:
    """Predict the checked columns and write the answer; numpy arrays (probabilities,
    regression values, std) go to orjson as they are, without a Python float per cell."""
    signature = loaded.signature
    result = predict_arrays(
        loaded.servable,
        signature,
        columns,
        PredictOptions(
            voting=options.voting,
            return_proba=options.return_proba,
            return_votes=options.return_votes,
            return_std=options.return_std,
        ),
    )
    services.metrics.observe_prediction(record.model, len(result.predictions))
    document: dict[str, Any] = {
        "model": record.model,
        "version": record.version,
        "task": signature.task,
        "predictions": result.predictions,
    }
    if signature.classes is not None:
        document["classes"] = list(signature.classes)
    document.update(result.as_dict())  # only what was asked for
    document["warnings"] = warnings
    return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)


def _parse(body: bytes, query_options: PredictOptionsIn | None = None) -> PredictRequest:
    """The request, its options over ``query_options``."""
    request = _parse_body(body)
    if query_options is None:
        return request
    given = request.options.model_dump(include=request.options.model_fields_set)
    options = query_options.model_copy(update=given)
    return request.model_copy(update={"options": options})


def _parse_body(body: bytes) -> PredictRequest:
    """The request; orjson parses, and anything it refuses goes through pydantic's own JSON
    parser, whose answers (problems, NaN, integers beyond 64 bits) the API documents."""
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError:
        raw = None
    if isinstance(raw, dict):
        try:
            return PredictRequest.model_validate(raw)
        except ValidationError:
            pass  # reported below, in the JSON parser's own words
    try:
        return PredictRequest.model_validate_json(body)
    except ValidationError as exc:
        problems = validation_problems(exc.errors())
        raise InvalidRequestError(count_text(len(problems)), problems) from None


def _key(record: VersionRecord) -> tuple[str, int, str]:
    return (record.model, record.version, record.artifact_sha256)


def _load(services: Services, record: VersionRecord) -> _Loaded:
    """The version's model ready to serve, from the cache or loaded into it."""

    def load() -> _Loaded:
        raw_signature = record.metadata.get("signature")
        if not isinstance(raw_signature, dict):
            raise IntegrityError(
                f"model {record.model!r} version {record.version} has no stored signature"
            )
        signature = ModelSignature.from_dict(raw_signature)
        pipeline = services.registry.load_model(record.model, record.version)
        inference = record.metadata.get("inference")
        recorded = inference if isinstance(inference, dict) else None
        loaded = _Loaded(prepare(pipeline, signature.task, recorded), signature)
        # A loaded model (and the server's own objects) will live long: keep them out of
        # the cyclic collector's full scans, which otherwise cost a 10,000-row request
        # (tens of thousands of new lists) 10-50 ms.  Garbage is collected first, so only
        # live objects are frozen; this runs once per load, never per request.
        gc.collect()
        gc.freeze()
        return loaded

    loaded = services.cache.get_or_load(_key(record), load, record.artifact_size)
    if not isinstance(loaded, _Loaded):  # the cache is typed loosely (object)
        raise TypeError(f"unexpected model cache entry {type(loaded).__name__}")
    return loaded
