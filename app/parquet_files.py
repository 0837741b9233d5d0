"""One-row Parquet files read with a layout seen before: no pyarrow call per request.

A one-row Parquet file as pandas writes it (30 float64 columns) is 19 kB: per column a
dictionary page holding the value and a data page pointing at it, then a 16 kB footer
(every column's metadata and statistics, the Arrow schema and pandas' metadata).
pyarrow spends about 0.5 ms of CPU reading it, most of it on the footer, which caps one
core at ~2,000 such requests a second where a JSON row serves ~5,500 (issue 24.1: a
table body at 16 clients should serve at least what JSON serves).

Clients send the same layout again and again, and in such a file only a few bytes hang
on the row's values: each value (in its page, stored as it is: uncompressed or one
snappy literal) and the statistics of its page and column (min and max, whose lengths
are fixed).  So the first file of a layout, once pyarrow has read it, is walked
(:mod:`app.thrift_compact`): its footer, every column's pages, where each value and
each statistic sits.  A later file of the same length whose every other byte is the
same is that layout with other values and statistics; pyarrow reads no statistic when
it reads a whole file, so its table is the values read from their places.  The layout is
kept only when reading it so gives pyarrow's table bit for bit.

Taken: one row group of one row, flat float64 columns without nulls, uncompressed or
snappy (pandas' default), a dictionary page and a data page per column (pyarrow's
default) or one plain data page (v1 or v2), no page checksums or page index.  Anything
else, or a file that differs elsewhere, returns None and pyarrow reads it as always.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from app.arrow_streams import FloatRow, FloatRows
from app.thrift_compact import Span, read_struct, read_varint

__all__ = ["MAX_BYTES", "float_row", "float_rows", "learn"]

MAX_BYTES: Final = 64 * 1024  # larger files are never learnt
_KEPT: Final = 16  # layouts remembered
_MAGIC: Final = b"PAR1"
_FLOAT64: Final = pa.float64()
_DOUBLE: Final = 5  # Parquet's physical type
_CODECS: Final = frozenset({0, 1})  # UNCOMPRESSED, SNAPPY
_CODEC_NAMES: Final = frozenset({"UNCOMPRESSED", "SNAPPY"})  # as pyarrow names them
_DICTIONARY_ENCODINGS: Final = frozenset({2, 8})  # PLAIN_DICTIONARY, RLE_DICTIONARY
_PLAIN: Final = 0
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_STATISTICS_BINARIES: Final = (1, 2, 5, 6)  # max, min, max_value, min_value


class _DeclinedError(Exception):
    """This file's layout is not one read here."""


@dataclass(frozen=True)
class _Layout:
    """A learnt file: a later one of ``length`` bytes is this layout when its bytes
    equal ``template`` wherever ``fixed`` (compared eight bytes at a time, up to the
    last value or statistic), and equal ``rest`` after that (the footer's last part:
    the Arrow schema and pandas' metadata, ~12 of a 30-column file's 19 kB)."""

    length: int
    words: int  # compared eight bytes at a time
    template: np.ndarray[Any, np.dtype[np.uint64]]  # the learnt file's first words
    fixed: np.ndarray[Any, np.dtype[np.uint64]]  # per word: 0xff per fixed byte
    rest: bytes  # the learnt file's bytes after those words: all fixed
    schema: pa.Schema
    columns: int
    first: int  # column j's value at byte first + j * step (pyarrow's columns of a
    step: int  # layout are as long as each other) ...
    places: np.ndarray[Any, np.dtype[np.intp]] | None  # ... else its 8 bytes' places

    def row(self, content: bytes) -> np.ndarray[Any, np.dtype[np.float64]] | None:
        """The row of ``content`` if it is of this layout (a view of its bytes)."""
        if not content.startswith(self.rest, 8 * self.words):  # one memcmp: ~0.3 us
            return None
        # count_nonzero: ~0.5 us for 19 kB where any() took 2 (a reduction of its own)
        words = np.frombuffer(content, np.uint64, self.words)
        if np.count_nonzero((words ^ self.template) & self.fixed):
            return None
        row: np.ndarray[Any, np.dtype[np.float64]]
        if self.places is None:
            row = np.ndarray((self.columns,), "<f8", content, self.first, (self.step,))
        else:
            row = np.frombuffer(content, np.uint8)[self.places].view(np.float64)
        return row


_LAYOUTS: list[_Layout] = []
# The schemas of files walked and not learnt (page checksums, say), each with how many
# more files of it are left unwalked: a walk costs ~2 ms for 30 columns, against
# pyarrow's 0.5 for the read, so a client whose files are never learnt pays it once in
# _REWALK files, and one whose files are learnt (a writer's other options, the same
# schema) is learnt after at most _REWALK of them.
_DECLINED: list[list[Any]] = []  # [schema, files left unwalked]
_REWALK: Final = 64
_LOCK = threading.Lock()


def float_row(content: bytes) -> FloatRow | None:
    """The row of a file laid out as one learnt by :func:`learn`, its values viewed in
    its bytes; None: read it with pyarrow (``app.bodies.read_table_body``)."""
    size = len(content)
    for layout in _LAYOUTS:
        if layout.length == size:
            row = layout.row(content)
            if row is not None:
                return FloatRow(layout.schema, row)
    return None


def float_rows(content: bytes) -> FloatRows | None:
    """:func:`float_row` as a one-row matrix, for the ways that take several rows."""
    row = float_row(content)
    return None if row is None else row.as_rows()


def learn(content: bytes, metadata: pq.FileMetaData, table: pa.Table) -> None:
    """Keep the layout of ``content``, which pyarrow read as ``table`` (its footer as
    ``metadata``), when it is one read here (see the module's docstring) and it is not
    known already.  pyarrow's reading of the footer declines most other files, and a
    file like one walked and declined before is not walked again."""
    if len(content) > MAX_BYTES or table.num_rows != 1 or metadata.num_row_groups != 1:
        return
    group = metadata.row_group(0)
    if not table.num_columns or group.num_columns != table.num_columns:
        return
    for j in range(group.num_columns):
        column = group.column(j)
        if column.compression not in _CODEC_NAMES or column.physical_type != "DOUBLE":
            return
    if any(kind != _FLOAT64 for kind in table.schema.types) or float_row(content) is not None:
        return
    if any(column.null_count for column in table.columns):
        return
    if _skipped(table.schema):
        return
    # Learning never fails a request: a file not learnt is read by pyarrow, as always
    # (read_table_body calls this inside its own handler of unreadable bytes).
    try:
        layout: _Layout | None = _walk(content, table)
        own = np.asarray(table.to_tensor(row_major=True).to_numpy()).reshape(-1)
    except (_DeclinedError, pa.ArrowException, ValueError, KeyError, TypeError, IndexError):
        layout = None
    row = None if layout is None else layout.row(content)
    learnt = row is not None and np.array_equal(row.view(np.uint64), own.view(np.uint64))
    with _LOCK:
        if layout is not None and learnt:
            _LAYOUTS.insert(0, layout)
            del _LAYOUTS[_KEPT:]
        else:
            _DECLINED.insert(0, [table.schema, _REWALK - 1])
            del _DECLINED[_KEPT:]


def _skipped(schema: pa.Schema) -> bool:
    """Is a file of this schema left unwalked (its schema's last walk declined)?"""
    with _LOCK:
        for entry in _DECLINED:
            if entry[0].equals(schema, check_metadata=True):
                _DECLINED.remove(entry)  # walked now, or kept below with one less left
                if entry[1] <= 0:
                    return False
                entry[1] -= 1
                _DECLINED.insert(0, entry)
                return True
    return False


def _walk(content: bytes, table: pa.Table) -> _Layout:
    """Where the values and statistics of ``content`` sit (raises _DeclinedError)."""
    size = len(content)
    if not (content.startswith(_MAGIC) and content.endswith(_MAGIC)) or size < 12:
        raise _DeclinedError
    footer_size = int.from_bytes(content[-8:-4], "little")
    footer, end = read_struct(content, size - 8 - footer_size)
    if end != size - 8 or footer.get(8) is not None or footer.get(3) != 1:
        raise _DeclinedError  # encrypted, or not one row
    groups = footer.get(4, [])
    if len(groups) != 1:
        raise _DeclinedError
    chunks = groups[0].get(1, [])
    names = table.schema.names
    if len(chunks) != len(names) or len(footer.get(2, [])) != len(names) + 1:
        raise _DeclinedError  # a nested schema, or columns pyarrow made of its own
    free = np.zeros(size, bool)
    values = np.empty((len(names), 8), np.intp)
    for j, (chunk, name) in enumerate(zip(chunks, names, strict=True)):
        values[j] = _value_at(content, chunk, name, free)
    free[values.reshape(-1)] = True
    words = (int(np.flatnonzero(free)[-1]) + 8) // 8  # whole words up to the last free byte
    fixed = np.where(free[: 8 * words], 0, 0xFF).astype(np.uint8)
    first = int(values[0, 0])
    step = int(values[1, 0] - first) if len(names) > 1 else 8
    even = np.array_equal(values[:, 0], first + step * np.arange(len(names)))
    return _Layout(
        length=size,
        words=words,
        template=np.frombuffer(content, np.uint64, words).copy(),
        fixed=fixed.view(np.uint64),
        rest=content[8 * words :],
        schema=table.schema,
        columns=len(names),
        first=first,
        step=step,
        places=None if even and step >= 8 else values.reshape(-1),
    )


def _value_at(content: bytes, chunk: dict[int, Any], name: str, free: np.ndarray) -> np.ndarray:
    """The eight places of a column's value; its statistics marked in ``free``."""
    meta = chunk[3]
    if any(field in chunk for field in (1, 4, 6, 8, 9)):
        raise _DeclinedError  # in another file, a page index, or encrypted
    path = meta[3]
    if meta[1] != _DOUBLE or meta[4] not in _CODECS or meta[5] != 1 or len(path) != 1:
        raise _DeclinedError
    if content[path[0].start : path[0].end] != name.encode():
        raise _DeclinedError
    _free_statistics(meta.get(12), free)
    chunk_start = meta.get(11, meta[9])
    chunk_end = chunk_start + meta[7]
    pos, slot = chunk_start, None
    if 11 in meta:
        pos, slot = _page(content, pos, meta[4], free, dictionary=True)
    if pos != meta[9]:
        raise _DeclinedError
    pos, plain = _page(content, pos, meta[4], free, dictionary=False)
    first = plain if slot is None else slot
    if pos != chunk_end or first is None or (slot is not None and plain is not None):
        raise _DeclinedError  # more pages, or values in the dictionary and plain, or neither
    return np.arange(8) + first


def _page(
    content: bytes, pos: int, codec: int, free: np.ndarray, dictionary: bool
) -> tuple[int, int | None]:
    """Where the page at ``pos`` ends and where its plain value starts (None: the data
    page of a dictionary)."""
    header, data = read_struct(content, pos)
    kind, compressed = header[1], header[3]
    if 4 in header:
        raise _DeclinedError  # a checksum of the page's bytes
    end = data + compressed
    if dictionary:
        page = header.get(7)
        if kind != _DICTIONARY_PAGE or page is None or page[1] != 1 or page[2] not in (0, 2):
            raise _DeclinedError
        return end, _last_value(content, data, end, codec)
    if kind == _DATA_PAGE:
        page = header[5]
        start = data
    elif kind == _DATA_PAGE_V2:
        page = header[8]
        if page[2] or page[3] != 1:
            raise _DeclinedError  # a null, or not one row
        start = data + page[5] + page[6]
        if not page.get(7, True):
            codec = 0
    else:
        raise _DeclinedError
    if page[1] != 1:
        raise _DeclinedError
    _free_statistics(page.get(8 if kind == _DATA_PAGE_V2 else 5), free)
    encoding = page[4 if kind == _DATA_PAGE_V2 else 2]
    if encoding in _DICTIONARY_ENCODINGS:
        return end, None
    if encoding != _PLAIN:
        raise _DeclinedError
    return end, _last_value(content, start, end, codec)


def _last_value(content: bytes, start: int, end: int, codec: int) -> int:
    """Where the last eight bytes of a page's values are, when they lie in the file as
    they are: uncompressed, or snappy's one literal of the whole."""
    if codec == 1:
        size, pos = read_varint(content, start)
        tag = content[pos]
        if tag & 3:
            raise _DeclinedError  # not a literal
        length = (tag >> 2) + 1
        pos += 1
        if length > 60:
            extra = length - 60
            length = int.from_bytes(content[pos : pos + extra], "little") + 1
            pos += extra
        if length != size or pos + length != end:
            raise _DeclinedError  # more than one literal
    if end - start < 8:
        raise _DeclinedError
    return end - 8


def _free_statistics(statistics: dict[int, Any] | None, free: np.ndarray) -> None:
    for field in _STATISTICS_BINARIES:
        span = (statistics or {}).get(field)
        if isinstance(span, Span):
            free[span.start : span.end] = True
