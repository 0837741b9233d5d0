"""Arrow tables of float64 columns, small or large, read into one matrix by one pyarrow call.

A one-row Arrow request of 30 columns spent most of its checking in per-column pyarrow
calls (a column, its type, its null count, its numpy view: about 6 us each) and in
parsing the schema's pandas metadata (JSON) again for every request (issue 24: Arrow
served fewer requests than JSON).  Here what a schema says is worked out once per schema
(kept for the last few schemas, compared with ``Schema.equals``, which costs far less
than hashing one), and a small table whose columns are all float64 becomes one
row-major matrix through ``RecordBatch.to_tensor``, which refuses nulls.  What a schema
says of one model's features (where each is, which columns are extra) is worked out
once too, per signature: matching 30 column names to 30 features took a one-row request
more than its matrix (issue 24).  The checks are those of the column-by-column way
(:func:`ensembles.inference.tables.check_table`), which takes any table this does not.
A small table's checked columns are those of one matrix (:class:`MatrixColumns`), as a
batch of JSON records' are: a loop turn's one-row Arrow requests are joined by one
concatenation and the model copies the result as it is, where the 30 columns of each
were concatenated one by one, then stacked (issue 24: 9 us of CPU a request in a turn
of six, 1.7 now; ``benchmarks/arrow_row_account.py``).

Large tables (``LARGE_ROWS`` rows and more, one record batch) are read the same way: the
column-by-column way concatenated every column to check them in one pass, and the model's
matrix was then stacked from the columns again (issue 24: 1.3 ms and 1.0 ms of thread
CPU for 10,000 rows of 30 columns in a server); here the row-major matrix is made once,
checked with two reductions, and the model reads it as it is (its columns are views of
it, :func:`ensembles.inference.servable.one_matrix`).  The values are the same float64s,
so every answer is the same bits.  Figures: docs/performance.md.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ensembles.builders import NUMERIC_DTYPES
from ensembles.inference.cells import (
    FLOAT32_LIMIT,
    CheckedColumns,
    Columns,
    MatrixColumns,
    MatrixRows,
    extra_warnings,
    unseen_categories,
)
from ensembles.signature import ModelSignature

__all__ = [
    "LARGE_ROWS",
    "SMALL_ROWS",
    "float_table",
    "index_columns",
    "small_float_matrix",
    "small_float_row",
    "small_float_rows",
]

SMALL_ROWS = 64  # tables up to this many rows may be read as one matrix
LARGE_ROWS = 1_024  # and tables from this many rows (between: column by column; 0: none)
_KEPT = 16  # schemas remembered
_FLOAT64 = pa.float64()


@dataclass(frozen=True)
class _Features:
    """Where one signature's features are in one schema, when it is all float64."""

    signature: ModelSignature  # held: plans are found by its id
    columns: tuple[int, ...] | None  # each feature's column; None: not for this path
    extra: tuple[str, ...]  # the warnings for columns that are not features
    in_order: bool = False  # the features are the schema's columns, all, in order


@dataclass(frozen=True)
class _Layout:
    """What one schema says, worked out once."""

    schema: pa.Schema
    floats: bool  # every column float64
    index_columns: frozenset[str]  # pandas' index columns (not features)
    features: dict[int, _Features] = field(default_factory=dict)  # by id of the signature


_LAYOUTS: list[_Layout] = []
_LOCK = threading.Lock()


def _layout(schema: pa.Schema) -> _Layout:
    for known in _LAYOUTS:  # the same object first: a stream read from its bytes
        if known.schema is schema:  # (app.arrow_streams) brings its layout's own schema
            return known
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


def float_table(signature: ModelSignature, table: pa.Table) -> CheckedColumns | None:
    """The checked columns of a small or large table of float64 columns, without nulls,
    all finite and within float32's range, as rows of one matrix (views when the columns
    are the features in order), and their warnings; None: check it column by column."""
    n_rows = table.num_rows
    if not (0 < n_rows <= SMALL_ROWS or (LARGE_ROWS and n_rows >= LARGE_ROWS)):
        return None
    features = _features(_layout(table.schema), signature)
    if features.columns is None:
        return None
    batches = table.to_batches()
    if len(batches) != 1:
        return None
    try:
        matrix = np.asarray(batches[0].to_tensor(row_major=True).to_numpy())
    except (pa.ArrowException, TypeError, ValueError):
        return None  # nulls: the careful way names the rows
    return _checked(signature, features, matrix)


def small_float_matrix(
    signature: ModelSignature, schema: pa.Schema, matrix: np.ndarray[Any, Any]
) -> CheckedColumns | None:
    """What :func:`float_table` gives for a table of ``schema`` whose values are
    ``matrix`` (a row per row, a column per field: an Arrow stream read straight from its
    bytes, ``app.arrow_streams.float_rows``); None: read the table and check it."""
    if not 0 < matrix.shape[0] <= SMALL_ROWS:
        return None
    features = _features(_layout(schema), signature)
    if features.columns is None:
        return None
    return _checked(signature, features, matrix)


def small_float_rows(
    signature: ModelSignature, schema: pa.Schema, matrix: np.ndarray[Any, Any]
) -> tuple[MatrixRows, list[str]] | None:
    """What :func:`small_float_matrix` checks, its columns left one matrix
    (:class:`MatrixRows`: made columns only where a request is answered alone) with the
    warnings, for a model whose signature lists no categories; else None."""
    if signature.categories or not 0 < matrix.shape[0] <= SMALL_ROWS:
        return None
    features = _features(_layout(schema), signature)
    if features.columns is None or matrix.dtype != np.float64 or not _within_float32(matrix):
        return None
    return MatrixRows(signature.feature_names, _in_order(features, matrix)), list(features.extra)


def small_float_row(
    signature: ModelSignature, schema: pa.Schema, values: np.ndarray[Any, Any]
) -> tuple[MatrixRows, list[str]] | None:
    """:func:`small_float_rows` of the one row ``values`` (float64, one per field of
    ``schema``: ``app.arrow_streams.float_row``), the same rows and warnings, its matrix a
    copy (``values`` may be a view of a request's bytes); None where that gives None, and
    for a row of more than ``_ROW_IN_PYTHON`` values (left to it)."""
    if signature.categories:
        return None
    features = _features(_layout(schema), signature)
    columns = features.columns
    if columns is None or values.dtype != np.float64 or not 0 < len(values) <= _ROW_IN_PYTHON:
        return None
    if not _row_within_float32(values.tolist()):
        return None
    row = values if features.in_order else values[list(columns)]
    return MatrixRows(signature.feature_names, row.reshape(1, -1).copy()), list(features.extra)


def _checked(
    signature: ModelSignature, features: _Features, matrix: np.ndarray[Any, Any]
) -> CheckedColumns | None:
    if matrix.dtype != np.float64 or not _within_float32(matrix):
        return None
    columns_of = features.columns
    if columns_of is None:  # (callers take this path only when it is not)
        return None
    columns: Columns
    if matrix.shape[0] <= SMALL_ROWS:  # one matrix the batch joins and the model copies
        columns = MatrixColumns(signature.feature_names, _in_order(features, matrix))
    else:
        by_column = matrix.T if features.in_order else matrix.T[list(columns_of)]
        columns = dict(zip(signature.feature_names, by_column, strict=True))
    return CheckedColumns(columns, [*features.extra, *unseen_categories(signature, columns)])


def _in_order(features: _Features, matrix: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The matrix's feature columns in the signature's order, a row per row (the matrix
    itself when they are the features in order)."""
    assert features.columns is not None
    return matrix if features.in_order else matrix[:, list(features.columns)]


def _within_float32(matrix: np.ndarray[Any, Any]) -> bool:
    """Is every value finite and within float32's range?  A NaN makes a minimum or
    maximum NaN, which no bound holds.  A small matrix in one pass over its absolute
    values (one row: one call fewer); a large one by its minimum and maximum, which
    allocate nothing (10,000 x 30: 0.3 ms less)."""
    if matrix.shape[0] == 1 and 0 < matrix.shape[1] <= _ROW_IN_PYTHON:
        return _row_within_float32(matrix[0].tolist())
    if matrix.shape[0] <= SMALL_ROWS:
        return bool(np.abs(matrix).max() <= FLOAT32_LIMIT)
    return bool(matrix.min() >= -FLOAT32_LIMIT and matrix.max() <= FLOAT32_LIMIT)


_ROW_IN_PYTHON = 256  # one row of up to this many values is bounded in Python


def _row_within_float32(values: list[float]) -> bool:
    """``np.abs(row).max() <= FLOAT32_LIMIT`` of one row's Python floats: NaN and the
    infinities make the sum NaN or infinite (``total - total`` is then NaN, never 0);
    past that ``max`` and ``min`` compare as numpy does.  In a served request the
    ufunc and the reduction cost more than the whole row's check here (their code is
    cold by then: issue 24.1)."""
    total = sum(values)
    if total - total != 0:
        return False
    return max(values) <= FLOAT32_LIMIT and min(values) >= -FLOAT32_LIMIT


def _features(layout: _Layout, signature: ModelSignature) -> _Features:
    known = layout.features.get(id(signature))
    if known is not None and known.signature is signature:
        return known
    found = _find_features(layout, signature)
    with _LOCK:
        if len(layout.features) >= _KEPT:
            layout.features.clear()
        layout.features[id(signature)] = found
    return found


def _find_features(layout: _Layout, signature: ModelSignature) -> _Features:
    """As :func:`ensembles.inference.tables.check_table` reads the schema: index columns
    skipped, a duplicate name refused, the first column of each name taken."""
    position: dict[str, int] = {}
    for i, name in enumerate(layout.schema.names):
        if name in layout.index_columns:
            continue
        if name in position:  # a duplicate: the careful way names it
            return _Features(signature, None, ())
        position[name] = i
    wanted = {f.name for f in signature.features}
    extra = tuple(extra_warnings([c for c in position if c not in wanted]))
    columns = tuple(position.get(f.name, -1) for f in signature.features)
    numeric = all(f.dtype in NUMERIC_DTYPES for f in signature.features)
    usable = layout.floats and numeric and bool(columns) and -1 not in columns
    in_order = columns == tuple(range(len(layout.schema.names)))
    return _Features(signature, columns if usable else None, extra, in_order)
