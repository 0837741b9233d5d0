"""Small Arrow IPC streams read with a schema seen before: one record batch, no reader.

An IPC stream opens with its schema message (for a 30-column table written from pandas,
about 6 kB: the fields and pandas' metadata), then its record batches. Opening a reader
decodes that schema on every request, about as long as the rest of a one-row request's
reading (issue 24: a one-row Arrow request cost more CPU than the same row as JSON;
209 us against 96 us in process for the bench's row, on a loaded machine). Clients send
the same schema again and again, so the schema message's bytes are kept with the schema
decoded from them (the last ``_KEPT`` of them): a body that starts with the same bytes
has that schema, and its one record batch is read on its own. Anything else (another
schema, dictionary batches, more than one batch, bytes after the end-of-stream marker, a
message that does not read) returns None and the body goes to pyarrow's stream reader,
which answers (or refuses) it as always.

A body may also be read without any pyarrow call (:func:`float_rows`): once a small
stream of float64 columns without nulls has been read here, its bytes up to its record
batch's body (the schema message and the batch's metadata: row count, null counts,
compression, every buffer's place and length) are kept with where each column's values
sit.  A later body whose bytes up to there are the same and whose length is the same has
its values at the same places, so its rows are read straight from the bytes into one
matrix (one numpy view and a copy).  Reading the message and the batch and making a
table cost a one-row request of the bench about 50 us (issue 24: an Arrow row served at
16 clients about 0.6x what a JSON row did); the layout is checked against pyarrow's own
reading, bit for bit, before it is kept.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

__all__ = ["MAX_BYTES", "FloatRow", "FloatRows", "float_row", "float_rows", "one_batch_table"]

MAX_BYTES: Final = 64 * 1024  # larger bodies are read by pyarrow's reader
_KEPT: Final = 16  # schema messages remembered
# After the last batch: the end-of-stream marker (with or without the continuation
# token of Arrow >= 0.15), or nothing.
_ENDS: Final = (b"", b"\xff\xff\xff\xff\x00\x00\x00\x00", b"\x00\x00\x00\x00")

_KNOWN: list[tuple[bytes, pa.Schema]] = []
_LOCK = threading.Lock()
_FLOAT_ROWS: Final = 64  # streams of at most this many rows may be learnt as a layout
_FLOAT64: Final = pa.float64()


@dataclass(frozen=True)
class FloatRows:
    """The rows of a stream of float64 columns without nulls: its schema, and its values
    as one C-ordered matrix (a row per row, a column per schema field, in order)."""

    schema: pa.Schema
    matrix: np.ndarray[Any, np.dtype[np.float64]]

    @property
    def num_rows(self) -> int:
        return int(self.matrix.shape[0])


class FloatRow(NamedTuple):
    """The one row of a one-row stream of float64 columns without nulls: its schema, and
    its values (one per schema field, in order) as a read-only view of the body's bytes."""

    schema: pa.Schema
    values: np.ndarray[Any, np.dtype[np.float64]]

    def as_rows(self) -> FloatRows:
        """The row as a one-row matrix of its own (the values copied out of the body)."""
        return FloatRows(self.schema, self.values.reshape(1, -1).copy())


@dataclass(frozen=True)
class _Layout:
    """Where a stream's values sit, for bodies that start with ``head`` and are
    ``length`` bytes long: column j's rows from byte ``first + j * step``."""

    head: bytes  # the schema message and the batch's metadata, up to the batch's body
    length: int
    schema: pa.Schema
    rows: int
    columns: int
    first: int
    step: int
    body_end: int  # where the end-of-stream marker (if any) starts

    def read(self, content: bytes) -> FloatRows | None:
        if content[self.body_end :] not in _ENDS:
            return None
        if self.rows == 1 and self.step == 8:  # one row: its values lie side by side
            row = np.frombuffer(content, "<f8", self.columns, self.first)
            return FloatRows(self.schema, row.astype(np.float64).reshape(1, self.columns))
        values = np.ndarray(
            (self.rows, self.columns),
            dtype="<f8",
            buffer=content,
            offset=self.first,
            strides=(8, self.step),
        )
        return FloatRows(self.schema, np.array(values, dtype=np.float64, order="C"))


_LAYOUTS: list[_Layout] = []


def float_rows(content: bytes) -> FloatRows | None:
    """The rows of a body laid out as one learnt by :func:`one_batch_table`, read from
    its bytes; None: read it with :func:`one_batch_table` (or pyarrow's reader)."""
    size = len(content)
    for layout in _LAYOUTS:
        if layout.length == size and content.startswith(layout.head):
            return layout.read(content)
    return None


def float_row(content: bytes) -> FloatRow | None:
    """The row of a one-row body laid out as one learnt by :func:`one_batch_table`, its
    values viewed in its bytes; None: read it with :func:`float_rows` (or pyarrow).

    Why: a one-row Arrow request at 16 clients is read and checked on the event loop,
    which is the server's bottleneck there (JSON's joined records are checked beside
    it).  Served, :func:`float_rows` and ``small_float_rows`` cost such a request
    ~13 us of the loop's CPU (their matrix copied, a frozen dataclass made, shape and
    dtype checks a one-row layout makes needless); this view and
    ``small_tables.small_float_row`` give the same checked row (issue 24.1)."""
    size = len(content)
    for layout in _LAYOUTS:
        if layout.length == size and content.startswith(layout.head):
            if layout.rows != 1 or layout.step != 8 or content[layout.body_end :] not in _ENDS:
                return None
            return FloatRow(
                layout.schema, np.frombuffer(content, "<f8", layout.columns, layout.first)
            )
    return None


def one_batch_table(content: bytes) -> pa.Table | None:
    """The table of a small stream of one record batch, its schema's message one seen
    before (learnt now otherwise); None: read it with pyarrow's stream reader."""
    if len(content) > MAX_BYTES:
        return None
    try:
        known = _schema_of(content)
        if known is None:
            return None
        start, schema = known
        reader = pa.BufferReader(pa.py_buffer(content))
        reader.seek(start)
        message = ipc.read_message(reader)
        if message.type != "record batch":
            return None
        batch = ipc.read_record_batch(message, schema)
        if content[reader.tell() :] not in _ENDS:
            return None
        _learn(content, message, batch, reader.tell())
    except (pa.ArrowException, OSError, EOFError, ValueError, TypeError):
        return None  # the reader names the problem
    return pa.Table.from_batches([batch], schema=schema)


def _learn(content: bytes, message: Any, batch: pa.RecordBatch, body_end: int) -> None:
    """Keep where the values of this stream sit, when it is a small one of float64
    columns without nulls whose columns lie at equal steps in ``content`` (read without
    a copy) and a view of them there is pyarrow's reading, bit for bit."""
    n_rows, n_columns = batch.num_rows, batch.num_columns
    if not (0 < n_rows <= _FLOAT_ROWS and n_columns) or _known(content):
        return
    if any(kind != _FLOAT64 for kind in batch.schema.types):
        return
    base = pa.py_buffer(content).address
    starts = []
    for column in batch.columns:
        validity, values = column.buffers()
        if column.null_count or validity is not None or column.offset:
            return
        if values is None or values.size < 8 * n_rows:
            return
        starts.append(values.address - base)
    step = starts[1] - starts[0] if n_columns > 1 else 8 * n_rows
    body_start = message.body.address - base
    if step < 8 * n_rows or starts[0] < body_start or starts[-1] + 8 * n_rows > body_end:
        return
    if starts != [starts[0] + j * step for j in range(n_columns)]:
        return
    layout = _Layout(
        content[:body_start],
        len(content),
        batch.schema,
        n_rows,
        n_columns,
        starts[0],
        step,
        body_end,
    )
    read = layout.read(content)
    own = np.asarray(batch.to_tensor(row_major=True).to_numpy())
    if read is None or not np.array_equal(read.matrix.view(np.uint64), own.view(np.uint64)):
        return
    with _LOCK:
        _LAYOUTS.insert(0, layout)
        del _LAYOUTS[_KEPT:]


def _known(content: bytes) -> bool:
    size = len(content)
    return any(k.length == size and content.startswith(k.head) for k in _LAYOUTS)


def _schema_of(content: bytes) -> tuple[int, pa.Schema] | None:
    """Where the schema message ends, and its schema."""
    for prefix, schema in _KNOWN:
        if content.startswith(prefix):
            return len(prefix), schema
    reader = pa.BufferReader(pa.py_buffer(content))
    message = ipc.read_message(reader)
    if message.type != "schema":
        return None
    end = reader.tell()
    schema = ipc.read_schema(message)
    with _LOCK:
        _KNOWN.insert(0, (content[:end], schema))
        del _KNOWN[_KEPT:]
    return end, schema
