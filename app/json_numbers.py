"""Columnar JSON instances of numbers read straight into one float64 matrix.

A 10,000-row columnar body of 30 numeric features holds 300,000 numbers: orjson makes a
Python float of each and a list of every row (10-14 ms), and checking them into arrays
costs as much again.  simdjson parses the body into its own tape and copies the rows'
numbers into one float64 buffer in C (``Array.as_buffer``), so no cell ever becomes a
Python object.  Only the well-formed case is read here: an object of ``instances``
(``{"columns": [names], "data": [[numbers], ...]}``, every row as long as ``columns``)
and optional ``options``, each key once, every number exact in a float64 (magnitude
below 2**53, as the checked fast path of :func:`ensembles.inference.check_rows` requires).
Anything else is None: the body is then parsed by orjson and checked cell by cell, which
names every problem as it always did.  Figures: docs/performance.md.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import simdjson
from numpy.typing import NDArray

from ensembles.inference.rows import exact_floats

__all__ = ["NumericColumnar", "read_numeric_columnar"]

MIN_BYTES = 8 * 1024  # below this orjson is as fast, and the inline path reads it anyway
_TOP_KEYS = frozenset({"instances", "options"})
_INSTANCE_KEYS = frozenset({"columns", "data"})
_ERRORS = (ValueError, TypeError, KeyError, IndexError, RuntimeError, MemoryError)


class NumericColumnar(NamedTuple):
    """A body's columnar instances as one float64 matrix (rows x columns), and its options
    object (None when absent), as JSON gave them."""

    columns: list[str]
    data: NDArray[np.float64]
    options: dict[str, Any] | None


def read_numeric_columnar(body: bytes) -> NumericColumnar | None:
    """The body's columnar numbers, or None when it is anything else (see the module)."""
    if len(body) < MIN_BYTES or b'"data"' not in body:
        return None
    try:
        return _read(simdjson.Parser(), body)
    except _ERRORS:
        return None  # not JSON, or not this shape: the usual parser says what it is


def _read(parser: Any, body: bytes) -> NumericColumnar | None:
    document = parser.parse(body)
    if not _object_of(document, _TOP_KEYS) or "instances" not in document:
        return None
    instances, options = document["instances"], document.get("options")
    if not _object_of(instances, _INSTANCE_KEYS) or len(instances) != 2:
        return None
    if options is not None and not isinstance(options, simdjson.Object):
        return None
    columns, data = instances["columns"], instances["data"]
    if not isinstance(columns, simdjson.Array) or not isinstance(data, simdjson.Array):
        return None
    names = [name for name in columns.as_list() if type(name) is str]
    if not names or len(names) != len(columns):
        return None
    n_rows, n_columns = len(data), len(names)
    rows: Any = data  # each row a list: len of a number raises (TypeError), of a str not
    if not n_rows or set(map(len, rows)) != {n_columns}:
        return None  # ragged rows, or a row that is not a list (a number has no len)
    if _brackets(body) != 2 + n_rows + sum(name.count("[") for name in names):
        return None  # a list inside a row (as_buffer would flatten it), or "[" in options
    flat = np.frombuffer(data.as_buffer(of_type="d"), dtype=np.float64)
    if flat.size != n_rows * n_columns or not exact_floats(flat):
        return None  # a number a float64 may have rounded: the careful path decides
    given = options.as_dict() if options is not None else None
    return NumericColumnar(names, flat.reshape(n_rows, n_columns), given)


def _object_of(value: Any, allowed: frozenset[str]) -> bool:
    """An object whose keys are allowed and each given once (simdjson keeps a repeated
    key's first value, orjson its last: such a body is left to orjson)."""
    if not isinstance(value, simdjson.Object):
        return False
    keys = list(value.keys())
    return len(set(keys)) == len(keys) and set(keys) <= allowed


def _brackets(body: bytes) -> int:
    """How many "[" the body holds (in strings too): one numpy pass over its bytes."""
    return int(np.count_nonzero(np.frombuffer(body, dtype=np.uint8) == ord("[")))
