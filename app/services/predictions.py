"""Predictions: from body bytes to response bytes in one go, on the event loop when that is
cheaper than a thread hand-off, else in one trip to a worker thread.

The stages of one prediction, as :mod:`ensembles.inference` names them: the body is
parsed into the request's **rows** (orjson for JSON; Arrow IPC or Parquet bodies are read
by pyarrow without copying the numbers); the version is resolved and its servable model
taken from the cache (loaded, checked and its compiled engine re-created only on a miss);
the rows become **checked columns**; the servable's engine **answers** and the
**prediction** holds what was asked for; the **response** is written by orjson, numpy
arrays as they are.  On a cache hit nothing is read from disk: the version reference is
resolved from memory while the registry database is unchanged
(``Registry.resolve_version``) and the model is already loaded.

Rule: a small body (``INLINE_MAX_BYTES``, JSON or a table) whose version and model are in
memory and that only native engines answer (``Servable.native_for``) is answered on the
event loop, its engine call shared with the other requests of the same loop turn
(:mod:`app.batching`); everything else (a load, a database read, any scikit-learn call,
votes and spread, big bodies) goes to a worker thread, once, so the loop never waits on
I/O or on more than a fraction of a millisecond of CPU.  Figures: docs/performance.md.
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from typing import NamedTuple

import orjson
import pyarrow as pa
from pydantic import ValidationError

from app import arrow_streams, parquet_files
from app.arrow_streams import FloatRow, FloatRows
from app.bodies import TableFormat, read_table_body
from app.json_numbers import read_numeric_columnar
from app.problems import InvalidRequestError, count_text, validation_problems
from app.schemas.predictions import PredictOptionsIn, PredictRequest
from app.services.container import Services
from app.services.explanations import check_explain_rows, explained
from app.services.routing import Target, target, target_inline
from app.services.shadows import ShadowRequest
from app.threads import in_thread
from ensembles import ModelSignature
from ensembles.errors import IntegrityError, PredictionInputError, Problem
from ensembles.inference import (
    CheckedColumns,
    Prediction,
    PredictOptions,
    Servable,
    check_rows,
    check_table,
    numbers_only,
    prepare,
)
from ensembles.inference.cells import MatrixRows
from ensembles.inference.small_tables import small_float_matrix, small_float_row, small_float_rows
from ensembles.registry import VersionRecord

INLINE_MAX_BYTES = 8 * 1024  # bodies up to this size may be answered on the event loop
# Table bodies up to this size too, when read from a layout seen before (no pyarrow call;
# larger ones are never learnt): a one-row Parquet file from pandas is 19 kB (issue 24.1).
TABLE_INLINE_MAX_BYTES = max(arrow_streams.MAX_BYTES, parquet_files.MAX_BYTES)


class Answer(NamedTuple):
    """The response bytes, and what the alias's shadow gets once they are sent."""

    content: bytes
    shadow: ShadowRequest | None


async def predict_version(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    query_options: PredictOptionsIn | None = None,
    key: str | None = None,
) -> Answer:
    """The response to the JSON prediction request ``body``; ``query_options`` are the
    options given in the query string, under those of the body; ``key`` the routing key
    of a weighted alias."""
    if len(body) <= INLINE_MAX_BYTES:
        request = _parse(body, query_options)
        inline = _inline_response(services, name, ref, request, key)
        if inline is not None:
            return inline if isinstance(inline, Answer) else await inline
        return await in_thread(_response, services, name, ref, request, key)
    return await in_thread(_body_response, services, name, ref, body, query_options, key)


async def predict_table(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    fmt: TableFormat,
    options: PredictOptionsIn,
    key: str | None = None,
) -> Answer:
    """The response for the rows of an Arrow IPC or Parquet body: a small one that native
    engines answer on the event loop, as small JSON bodies are, else in a thread."""
    if len(body) <= TABLE_INLINE_MAX_BYTES:
        inline = _inline_table(services, name, ref, body, fmt, options, key)
        if inline is not None:
            return inline if isinstance(inline, Answer) else await inline
    return await in_thread(_table_response, services, name, ref, body, fmt, options, key)


class _LaidOut(NamedTuple):
    """A table format's readers of bodies laid out as one seen before (None: not so)."""

    row: Callable[[bytes], FloatRow | None]  # a lone row, viewed in the body
    rows: Callable[[bytes], FloatRows | None]  # its rows as one matrix


_LAID_OUT: dict[TableFormat, _LaidOut] = {
    "arrow": _LaidOut(arrow_streams.float_row, arrow_streams.float_rows),
    "parquet": _LaidOut(parquet_files.float_row, parquet_files.float_rows),
}


def _inline_table(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    fmt: TableFormat,
    options: PredictOptionsIn,
    key: str | None,
) -> Answer | Awaitable[Answer] | None:
    """The answer to a small table body when it needs no I/O and only native engines (the
    rule of :func:`_inline_response`), else None.  Reading a few rows of Arrow or Parquet
    takes tens of microseconds; in a worker thread, sixteen clients' requests queued for
    the GIL behind each other's pyarrow calls (issue 24: 233 req/s from 16 clients against
    592 from one; docs/performance.md)."""
    if not _native_options(options):
        return None
    max_rows = services.settings.max_predict_rows  # (at least 1)
    readers = _LAID_OUT[fmt]
    # pyarrow reads only bodies of up to INLINE_MAX_BYTES here; a larger one is answered
    # here only when it is read from a layout seen before.
    careful = len(body) <= INLINE_MAX_BYTES
    # A lone row laid out as before, read later only if it is not batched.
    row = readers.row(body) if services.batcher.enabled else None
    known = None
    if row is None:
        known = readers.rows(body)
        if known is not None and max_rows is not None and known.num_rows > max_rows:
            known = None  # the reader's 413
    table: pa.Table | None = None
    if row is not None:
        n_rows = 1
    elif known is None:
        if not careful:
            return None
        table = read_table_body(body, fmt, max_rows)  # a bad body: 422 or 413 before a 404
        n_rows = table.num_rows
    else:
        n_rows = known.num_rows
    chosen = target_inline(services, name, ref, key)
    if chosen is None:
        return None
    servable = services.cache.peek(
        _key(chosen.record), lambda value: isinstance(value, Servable) and value.native_for(n_rows)
    )
    if not isinstance(servable, Servable):
        return None
    if row is not None:
        one = None if chosen.shadowed else small_float_row(servable.signature, *row)
        if one is not None:  # its columns made only if it is answered alone
            return _batched_rows(services, chosen, servable, *one, options)
        known = row.as_rows()  # declined: the way of any small table from here
    checked = None
    if known is not None and services.batcher.enabled and not chosen.shadowed:
        rows = small_float_rows(servable.signature, known.schema, known.matrix)
        if rows is not None:  # its columns made only if it is answered alone
            return _batched_rows(services, chosen, servable, *rows, options)
    if known is not None:
        checked = small_float_matrix(servable.signature, known.schema, known.matrix)
    if table is None and (checked is None or chosen.shadowed):  # the careful way, a shadow
        if not careful:
            return None
        table = read_table_body(body, fmt, max_rows)
    if checked is None:
        checked = check_table(servable.signature, table, max_rows)
    if services.batcher.enabled:
        return _batched(services, chosen, servable, checked, options, table, query=True)
    try:
        return _write(services, chosen, servable, checked, options, table)
    except PredictionInputError as exc:
        raise _in_query(exc) from None


def _body_response(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    query_options: PredictOptionsIn | None,
    key: str | None,
) -> Answer:
    """A JSON body's whole prediction, synchronously (blocking: a worker thread's job).

    Columnar numbers are read straight into one float64 matrix (:mod:`app.json_numbers`)
    and serve a model that takes numbers only; any other body, or a model with string or
    boolean features (whose messages quote the cells as sent), has the body parsed whole.
    A model in memory that takes more than numbers skips the matrix's attempt: simdjson
    parsed a 10,000-row body of such rows (10 ms) before orjson parsed it again.
    """
    known_mixed = _takes_more_than_numbers(services, name, ref, key)
    request = None if known_mixed else _numeric_request(body, query_options)
    if request is None:
        return _response(services, name, ref, _parse(body, query_options), key)
    chosen = target(services, name, ref, key)
    servable = servable_for(services, chosen.record)
    if not numbers_only(servable.signature):
        request = _parse(body, query_options)
    return _checked_response(services, chosen, servable, request)


def _takes_more_than_numbers(services: Services, name: str, ref: str, key: str | None) -> bool:
    """Is the version the request names in memory, and does its model take strings or
    booleans?  False when that needs the registry or a load (the body is read first)."""
    chosen = target_inline(services, name, ref, key)
    servable = None if chosen is None else services.cache.peek(_key(chosen.record), hit=False)
    return isinstance(servable, Servable) and not numbers_only(servable.signature)


def _numeric_request(body: bytes, query_options: PredictOptionsIn | None) -> PredictRequest | None:
    """The request of a columnar body of numbers, its rows one matrix; else None."""
    numbers = read_numeric_columnar(body)
    if numbers is None:
        return None
    raw: dict[str, object] = {"instances": {"columns": numbers.columns, "data": numbers.data}}
    if numbers.options is not None:
        raw["options"] = numbers.options
    try:
        request = PredictRequest.model_validate(raw)
    except ValidationError:
        return None  # the whole body's parse reports it, in the JSON parser's own words
    return _with_query(request, query_options)


def _table_response(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    fmt: TableFormat,
    options: PredictOptionsIn,
    key: str | None,
) -> Answer:
    """A table body's prediction, synchronously: the table is read first (a 422 or 413 for
    the body comes before a 404, as for JSON bodies), then checked against the version's
    signature column by column, straight into numpy."""
    max_rows = services.settings.max_predict_rows
    table = read_table_body(body, fmt, max_rows)
    chosen = target(services, name, ref, key)
    servable = servable_for(services, chosen.record)
    checked = check_table(servable.signature, table, max_rows)
    try:
        return _write(services, chosen, servable, checked, options, table)
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


def _inline_response(
    services: Services, name: str, ref: str, request: PredictRequest, key: str | None
) -> Answer | Awaitable[Answer] | None:
    """The response if it needs no I/O and only native engines (GTIL, numpy members: tens
    of microseconds of CPU for a few rows), else None: the request then goes to a thread."""
    if not _native_options(request.options):
        return None
    chosen = target_inline(services, name, ref, key)
    if chosen is None:
        return None
    instances = request.instances
    rows = instances.get("data") if isinstance(instances, dict) else instances
    if not isinstance(rows, list):
        return None
    n_rows = len(rows)
    servable = services.cache.peek(
        _key(chosen.record), lambda value: isinstance(value, Servable) and value.native_for(n_rows)
    )
    if not isinstance(servable, Servable):
        return None
    if services.batcher.enabled:
        max_rows = services.settings.max_predict_rows
        if n_rows == 1 and rows is instances:  # one record: checked with its batch-mates
            return _batched_record(services, chosen, servable, request, rows)
        checked = check_rows(servable.signature, request.instances, max_rows)
        return _batched(services, chosen, servable, checked, request.options, request.instances)
    return _checked_response(services, chosen, servable, request)


def _native_options(options: PredictOptionsIn) -> bool:
    """May native engines answer these options (on the event loop)?"""
    if options.voting is not None or options.return_votes or options.return_std:
        return False  # scikit-learn's members answer these
    return not options.explain  # explanations are computed off the event loop


async def _batched(
    services: Services,
    chosen: Target,
    servable: Servable,
    checked: CheckedColumns,
    options: PredictOptionsIn,
    rows: object,
    query: bool = False,
) -> Answer:
    """An inline answer whose engine call is shared with the requests of the same event
    loop turn (:mod:`app.batching`); ``query``: the options came in the query string."""
    record = chosen.record
    try:
        prediction = await services.batcher.predict(
            servable, checked.columns, predict_options(options)
        )
    except PredictionInputError as exc:
        if query:
            raise _in_query(exc) from None
        raise
    n_rows = len(prediction.predictions)
    services.metrics.observe_prediction(record.model, n_rows, record.version, chosen.alias)
    return _write(services, chosen, servable, checked, options, rows, prediction)


async def _batched_rows(
    services: Services,
    chosen: Target,
    servable: Servable,
    rows: MatrixRows,
    warnings: list[str],
    options: PredictOptionsIn,
) -> Answer:
    """:func:`_batched` for the checked rows of a small Arrow body read from its bytes
    (options in the query string, no shadow), joined by their matrix: making their
    columns cost a one-row request of 30 columns 7 us of CPU (issue 24)."""
    record = chosen.record
    try:
        prediction = await services.batcher.predict(servable, rows, predict_options(options))
    except PredictionInputError as exc:
        raise _in_query(exc) from None
    n_rows = len(prediction.predictions)
    services.metrics.observe_prediction(record.model, n_rows, record.version, chosen.alias)
    return _written(chosen, servable, options, warnings, None, prediction)


async def _batched_record(
    services: Services,
    chosen: Target,
    servable: Servable,
    request: PredictRequest,
    instances: list[object],
) -> Answer:
    """:func:`_batched` for a request of one record, its check shared with the batch's
    too (:meth:`app.batching.Batcher.predict_record`)."""
    record = chosen.record
    options = request.options
    prediction, warnings = await services.batcher.predict_record(
        servable, instances, predict_options(options), services.settings.max_predict_rows
    )
    n_rows = len(prediction.predictions)
    services.metrics.observe_prediction(record.model, n_rows, record.version, chosen.alias)
    return _written(chosen, servable, options, warnings, instances, prediction)


def _response(
    services: Services, name: str, ref: str, request: PredictRequest, key: str | None
) -> Answer:
    chosen = target(services, name, ref, key)
    return _checked_response(services, chosen, servable_for(services, chosen.record), request)


def _checked_response(
    services: Services, chosen: Target, servable: Servable, request: PredictRequest
) -> Answer:
    """The request's rows checked against the version's signature, then predicted."""
    max_rows = services.settings.max_predict_rows
    checked = check_rows(servable.signature, request.instances, max_rows)
    return _write(services, chosen, servable, checked, request.options, request.instances)


def _write(
    services: Services,
    chosen: Target,
    servable: Servable,
    checked: CheckedColumns,
    options: PredictOptionsIn,
    rows: object,
    prediction: Prediction | None = None,
) -> Answer:
    """Predict the checked columns and write the response; numpy arrays (probabilities,
    regression values, std) go to orjson as they are, without a Python float per cell.
    ``rows`` are the request's rows as given, for the alias's shadow; ``prediction``:
    already made (by a batch)."""
    record = chosen.record
    if options.explain:
        check_explain_rows(services, _row_count(checked), ("instances",))
    prediction = prediction or predict_checked(  # (a Prediction is always true)
        services, record, servable, checked, predict_options(options), chosen.alias
    )
    explanations = None
    if options.explain:
        explanation = explained(services, record, servable, checked)
        explanations = explanation.document(options.explain_top)
    return _written(chosen, servable, options, checked.warnings, rows, prediction, explanations)


def _written(
    chosen: Target,
    servable: Servable,
    options: PredictOptionsIn,
    warnings: list[str],
    rows: object,
    prediction: Prediction,
    explanations: object = None,
) -> Answer:
    """The response of a prediction: orjson writes numpy arrays as they are."""
    signature = servable.signature
    record = chosen.record
    response: dict[str, object] = {
        "model": record.model,
        "version": record.version,
        "task": signature.task,
        "predictions": prediction.predictions,
    }
    if signature.classes is not None:
        response["classes"] = list(signature.classes)
    response.update(prediction.as_dict())  # only what was asked for
    if options.explain:
        response["explanations"] = explanations
    response["warnings"] = warnings
    content = orjson.dumps(response, option=orjson.OPT_SERIALIZE_NUMPY)
    return Answer(content, chosen.shadow_of(rows, signature.task, prediction.predictions))


def predict_options(options: PredictOptionsIn) -> PredictOptions:
    """What the engine is asked, of a request's options: one frozen (never modified)
    ``PredictOptions`` per combination, shared by the requests asking it (made each
    time, its frozen ``__init__`` cost every prediction ~1 us; there are at most 24)."""
    key = (options.voting, options.return_proba, options.return_votes, options.return_std)
    made = _PREDICT_OPTIONS.get(key)
    if made is None:
        made = _PREDICT_OPTIONS[key] = PredictOptions(
            voting=options.voting,
            return_proba=options.return_proba,
            return_votes=options.return_votes,
            return_std=options.return_std,
        )
    return made


_PREDICT_OPTIONS: dict[tuple[object, bool, bool, bool], PredictOptions] = {}


def _row_count(checked: CheckedColumns) -> int:
    return len(next(iter(checked.columns.values()), ()))


def predict_checked(
    services: Services,
    record: VersionRecord,
    servable: Servable,
    checked: CheckedColumns,
    options: PredictOptions,
    alias: str = "",
) -> Prediction:
    """The prediction of checked columns, counted in the metrics (by model, version and
    the alias it was reached through): the one step every protocol (``/v1`` JSON and
    tables, the Open Inference Protocol) ends in."""
    prediction = services.batcher.predict_blocking(servable, checked.columns, options)
    rows = len(prediction.predictions)
    services.metrics.observe_prediction(record.model, rows, record.version, alias)
    return prediction


def _parse(body: bytes, query_options: PredictOptionsIn | None = None) -> PredictRequest:
    """The request, its options over ``query_options``."""
    return _with_query(_parse_body(body), query_options)


def _with_query(request: PredictRequest, query_options: PredictOptionsIn | None) -> PredictRequest:
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


def servable_for(services: Services, record: VersionRecord) -> Servable:
    """The version's model ready to serve, from the cache or loaded into it."""

    def load() -> Servable:
        raw_signature = record.metadata.get("signature")
        if not isinstance(raw_signature, dict):
            raise IntegrityError(
                f"model {record.model!r} version {record.version} has no stored signature"
            )
        signature = ModelSignature.from_dict(raw_signature)
        pipeline = services.registry.load_model(record.model, record.version)
        inference = record.metadata.get("inference")
        recorded = inference if isinstance(inference, dict) else None
        servable = prepare(pipeline, signature, recorded, services.settings.row_parts)
        # Rule: collect, then freeze, once per load (never per request), so the cyclic
        # collector's full scans skip the long-lived model.  Figures: docs/performance.md.
        gc.collect()
        gc.freeze()
        return servable

    servable = services.cache.get_or_load(_key(record), load, record.artifact_size)
    if not isinstance(servable, Servable):  # the cache is typed loosely (object)
        raise TypeError(f"unexpected model cache entry {type(servable).__name__}")
    return servable
