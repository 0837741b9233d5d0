"""Small Arrow tables of float64 columns read into one matrix by one pyarrow call.

A one-row Arrow request of 30 columns spent most of its checking in per-column pyarrow
calls (a column, its type, its null count, its numpy view: about 6 us each) and in
parsing the schema's pandas metadata (JSON) again for every request (issue 24: Arrow
served fewer requests than JSON).  Here what a schema says is worked out once per schema
(kept for the last few schemas, compared with ``Schema.equals``, which costs far less
than hashing one), and a small table whose columns are all float64 becomes one
row-major matrix through ``RecordBatch.to_tensor``, which refuses nulls.  The checks
are those of the column-by-column way (:func:`ensembles.inference.tables.check_table`),
which takes any table this does not.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ensembles.builders import NUMERIC_DTYPES
from ensembles.inference.cells import FLOAT32_LIMIT, Columns
from ensembles.signature import ModelSignature

__all__ = ["SMALL_ROWS", "index_columns", "small_float_columns"]

SMALL_ROWS = 64  # tables up to this many rows may be read as one matrix
_KEPT = 16  # schemas remembered
_FLOAT64 = pa.float64()


@dataclass(frozen=True)
class _Layout:
    """What one schema says, worked out once."""

    schema: pa.Schema
    floats: bool  # every column float64
    index_columns: frozenset[str]  # pandas' index columns (not features)


_LAYOUTS: list[_Layout] = []
_LOCK = threading.Lock()


def _layout(schema: pa.Schema) -> _Layout:
    for known in _LAYOUTS:
        if known.schema.equals(schema, check_metadata=True):
            return known
    layout = _Layout(schema, all(kind == _FLOAT64 for kind in schema.types), _pandas_index(schema))
    with _LOCK:
        _LAYOUTS.insert(0, layout)
        del _LAYOUTS[_KEPT:]
    return layout


def _pandas_index(schema: pa.Schema) -> frozenset[str]:
    raw = (schema.metadata or {}).get(b"pandas")
    try:
        document: Any = json.loads(raw) if raw is not None else {}
    except ValueError:
        document = {}  # as pyarrow's own reading: no usable metadata, no index
    index = document.get("index_columns") if isinstance(document, dict) else None
    return frozenset(c for c in index or [] if isinstance(c, str))  # a RangeIndex: a dict


def index_columns(schema: pa.Schema) -> frozenset[str]:
    """The columns pandas wrote for its index (skipped: they are not features)."""
    return _layout(schema).index_columns


def small_float_columns(
    signature: ModelSignature, table: pa.Table, position: dict[str, int]
) -> Columns | None:
    """The checked columns of a small table of float64 columns, without nulls, all
    finite and within float32's range, as views of one row-major matrix; None: check it
    column by column."""
    features = signature.features
    if not features or not 0 < table.num_rows <= SMALL_ROWS:
        return None
    if not _layout(table.schema).floats:
        return None
    columns = [position.get(f.name) for f in features]
    if any(j is None for j in columns) or any(f.dtype not in NUMERIC_DTYPES for f in features):
        return None
    batches = table.to_batches()
    if len(batches) != 1:
        return None
    try:
        matrix = np.asarray(batches[0].to_tensor(row_major=True).to_numpy())
    except (pa.ArrowException, TypeError, ValueError):
        return None  # nulls: the careful way names the rows
    if matrix.dtype != np.float64 or not np.isfinite(matrix).all():
        return None
    if np.abs(matrix).max() > FLOAT32_LIMIT:
        return None
    return {f.name: matrix[:, j] for f, j in zip(features, columns, strict=True)}
