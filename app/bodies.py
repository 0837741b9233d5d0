"""Request bodies: the routes whose problems must all be reported at once, whose bodies
are too large to parse on the event loop, or that take tables (Arrow IPC, Parquet) as well
as JSON read them by hand; every JSON body, read by hand or by FastAPI, is parsed by orjson.

orjson bounds nesting (1,024 levels) and refuses what is not UTF-8, where the standard
library recurses until ``RecursionError``: a body of 100,000 brackets was a 500.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Final, Literal

import orjson
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from app import parquet_files
from app.arrow_streams import one_batch_table
from app.problems import InvalidRequestError, UnsupportedMediaTypeError
from ensembles import Problem, TooLargeError
from ensembles.inference import check_row_count

TableFormat = Literal["arrow", "parquet"]
ARROW_STREAM: Final = "application/vnd.apache.arrow.stream"
ARROW_FILE: Final = "application/vnd.apache.arrow.file"
PARQUET: Final = "application/vnd.apache.parquet"
# Media types of table bodies (prediction batches) and the format each one names.
TABLE_MEDIA_TYPES: Final[dict[str, TableFormat]] = {
    ARROW_STREAM: "arrow",
    ARROW_FILE: "arrow",
    PARQUET: "parquet",
    "application/x-parquet": "parquet",
}
_ARROW_FILE_MAGIC = b"ARROW1"
# Fewest values (rows x columns) of a Parquet body decoded by pyarrow's thread pool; a
# smaller one is decoded on the calling thread. On this 2-core machine the pool's hand-offs
# cost more than they saved up to 10,000 rows of 30 columns (one row: 755 us with the pool
# against 492 without; 10,000 rows: 2.0 ms against 1.5) and saved from 30,000 (2.5 ms
# against 4.2; 100,000 rows: 5.7 against 9.2): issue 24.1, docs/performance.md.
_THREADED: Final = 500_000
_NAMES = {"arrow": "Arrow IPC stream", "parquet": "Parquet file"}


def media_type(request: Request) -> str:
    """The body's media type, without parameters, lower case ('' when absent)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def check_json_media_type(request: Request) -> None:
    media = media_type(request)
    if not is_json(media):
        raise UnsupportedMediaTypeError(
            f"cannot take a {media or 'untyped'} body",
            [Problem(("body",), "send application/json")],
        )


async def read_prediction_body(request: Request) -> tuple[bytes, TableFormat | None]:
    """The raw body of a prediction request and its table format (None: JSON); 415 for
    any other media type."""
    media = media_type(request)
    fmt = TABLE_MEDIA_TYPES.get(media)
    if fmt is None and not is_json(media):
        msg = f"send application/json, or a table as {ARROW_STREAM} or {PARQUET}"
        raise UnsupportedMediaTypeError(
            f"cannot take a {media or 'untyped'} body", [Problem(("body",), msg)]
        )
    return await request.body(), fmt


async def read_json_bytes(request: Request) -> bytes:
    """The raw body of a JSON request (415 for another media type)."""
    check_json_media_type(request)
    return await request.body()


async def read_json(request: Request) -> Any:
    """The parsed body of a small JSON request whose schema is checked by hand."""
    body = await read_json_bytes(request)
    return parse_json(body)


def parse_json(body: bytes) -> Any:
    """The JSON value of ``body``; a 422 at ``("body",)`` for bytes that are not JSON,
    not UTF-8, or nested deeper than orjson's 1,024 levels."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(
            "the body is not valid JSON", [Problem(("body",), f"invalid JSON: {exc}")]
        ) from None


class _OrjsonRequest(Request):
    """A request whose ``json()`` is orjson's: FastAPI turns its ``JSONDecodeError`` (a
    subclass of the standard one) into a 422, where the standard parser's
    ``RecursionError`` and ``UnicodeDecodeError`` became a 400 outside the document."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = orjson.loads(await self.body())
        return self._json


class OrjsonRoute(APIRoute):
    """The route class of every router whose bodies FastAPI parses."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(_OrjsonRequest(request.scope, request.receive))

        return handle


def read_table_body(content: bytes, fmt: TableFormat, max_rows: int | None) -> pa.Table:
    """The rows of an Arrow IPC (stream or file) or Parquet body, as one Arrow table.

    Unreadable bytes are a 422 at ``("body",)``; more than ``max_rows`` rows a 413
    (Parquet: counted from its footer, before any column is decoded).  An IPC stream is
    read without copying the numbers: the table's buffers point into ``content``.
    Blocking (CPU): call it from a worker thread.
    """
    try:
        if fmt == "parquet":
            parquet = pq.ParquetFile(pa.BufferReader(content))
            metadata = parquet.metadata
            if max_rows is not None and metadata.num_rows > max_rows:
                check_row_count(metadata.num_rows, max_rows)
            table = parquet.read(use_threads=metadata.num_rows * metadata.num_columns >= _THREADED)
            if metadata.num_rows == 1:
                parquet_files.learn(content, metadata, table)  # read without pyarrow next time
            return table
        return _read_arrow(content, max_rows)
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
        what = f"not a readable {_NAMES[fmt]}"
        problem = Problem(("body",), f"{what}: {exc}")
        raise InvalidRequestError(f"the body is {what}", [problem]) from None


def _read_arrow(content: bytes, max_rows: int | None) -> pa.Table:
    """Record batches one by one, so a body over the row limit is not decoded to its end."""
    buffer = pa.py_buffer(content)
    if content.startswith(_ARROW_FILE_MAGIC):
        return ipc.open_file(buffer).read_all()
    table = one_batch_table(content)  # a small stream whose schema came before
    if table is not None:
        _check_streamed_rows(table.num_rows, max_rows)
        return table
    reader = ipc.open_stream(buffer)
    batches: list[pa.RecordBatch] = []
    n_rows = 0
    for batch in reader:
        n_rows += batch.num_rows
        _check_streamed_rows(n_rows, max_rows)
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=reader.schema)


def _check_streamed_rows(n_rows: int, max_rows: int | None) -> None:
    if max_rows is not None and n_rows > max_rows:
        msg = f"more than {max_rows} rows; at most {max_rows} rows per request"
        raise TooLargeError("too many rows in one request", [Problem(("instances",), msg)])
