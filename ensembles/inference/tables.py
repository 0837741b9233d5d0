"""Checked columns from an Arrow table's rows (Arrow IPC or Parquet bodies, read by
``app.bodies``), held to the JSON rules column by column:

* numeric features take integer and floating Arrow columns as they are (float64, or int64
  for a complete integer column of an int64 feature); nulls are missing values (refused
  where training had none), NaN, infinities and numbers beyond float32's range are
  refused, as in JSON;
* any other Arrow type goes through the JSON cell checks (``to_pylist``), so a string in a
  numeric column, a number in a string column or a non-boolean in a boolean column is
  named by row and column, with the same messages (and at most ``MAX_PROBLEMS`` shown);
* categories training never saw are warned of as in JSON (:func:`unseen_categories`).

Columns a pandas index was stored in (``pa.Table.from_pandas``, ``DataFrame.to_parquet``)
are not instances' columns and are skipped silently, as dataset uploads skip them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ensembles.builders import NUMERIC_DTYPES, FeatureColumn
from ensembles.errors import Problem
from ensembles.inference.cells import (
    ABSENT,
    FLOAT32_LIMIT,
    MAX_PROBLEMS,
    BadCells,
    CheckedColumns,
    Columns,
    beyond_float32,
    cannot_be_missing,
    check_column,
    check_row_count,
    extra_warnings,
    input_error,
    missing_column_message,
    scan_cells,
    unseen_categories,
)
from ensembles.inference.small_tables import float_table, index_columns
from ensembles.signature import ModelSignature

__all__ = ["check_table"]

_INT64_MAX = np.iinfo(np.int64).max


def check_table(
    signature: ModelSignature, table: pa.Table, max_rows: int | None = None
) -> CheckedColumns:
    """The checked columns of an Arrow table's rows; every problem at once, as
    :func:`check_rows` reports them (PredictionInputError; TooLargeError over ``max_rows``)."""
    check_row_count(table.num_rows, max_rows)
    whole = float_table(signature, table)  # small or large tables of float64 columns
    if whole is not None:
        return whole
    skipped = index_columns(table.schema)
    position: dict[str, int] = {}
    keyed: list[tuple[tuple[int, int], Problem]] = []
    for i, name in enumerate(table.column_names):
        if name in skipped:
            continue
        if name in position:
            problem = Problem(("instances", "columns"), f"duplicate column {name!r}")
            keyed.append(((-1, -1), problem))
        position.setdefault(name, i)
    total = len(keyed)
    wanted = {f.name for f in signature.features}
    floats = None if total else _float_columns(signature, table, position)
    if floats is not None:
        extra = extra_warnings([c for c in position if c not in wanted])
        return CheckedColumns(floats, extra + unseen_categories(signature, floats))
    arrays: Columns = {}
    for j, feature in enumerate(signature.features):
        index = position.get(feature.name)
        column = None if index is None else table.column(index)
        absent = (
            ""
            if column is not None
            else missing_column_message(  # (difflib: slow)
                feature.name, [c for c in position if c not in wanted]
            )
        )
        (bad, n_bad), array = _read_column(feature, column, table.num_rows, signature, absent)
        total += n_bad
        keyed += [((row, j), Problem(("instances", row, feature.name), msg)) for row, msg in bad]
        if not total and array is not None:
            arrays[feature.name] = array
    if total:
        keyed.sort(key=lambda item: item[0])
        raise input_error("instances", [p for _, p in keyed], total)
    extra = extra_warnings([c for c in position if c not in wanted])
    return CheckedColumns(arrays, extra + unseen_categories(signature, arrays))


def _float_columns(
    signature: ModelSignature, table: pa.Table, position: dict[str, int]
) -> Columns | None:
    """The fast path of a table of numbers (a numeric feature's float64 column without
    nulls, all of them finite and within float32's range): every column checked in one
    numpy pass instead of a dozen calls each (1.9 ms of a one-row, 30-column request went
    there, issue 24).  Gives the very arrays the careful path gives; None: take it."""
    columns: list[pa.ChunkedArray] = []
    for feature in signature.features:
        index = position.get(feature.name)
        if index is None or feature.dtype not in NUMERIC_DTYPES:
            return None
        column = table.column(index)
        if column.type != pa.float64() or column.null_count:
            return None
        columns.append(column)
    arrays = [np.asarray(column.to_numpy()) for column in columns]
    cells = np.concatenate(arrays) if arrays else np.empty(0)
    if not np.isfinite(cells).all() or _may_pass_float32(cells):
        return None  # the careful path names the rows
    return {f.name: array for f, array in zip(signature.features, arrays, strict=True)}


def _read_column(
    feature: FeatureColumn,
    column: pa.ChunkedArray | None,
    n_rows: int,
    signature: ModelSignature,
    absent: str,
) -> tuple[BadCells, np.ndarray[Any, Any] | None]:
    """The bad cells of one feature column and, when there are none, its array."""
    allow_missing = signature.accepts_missing(feature)
    if column is None:
        return scan_cells(feature, [ABSENT] * n_rows, allow_missing, absent), None
    if feature.dtype in NUMERIC_DTYPES and _is_number(column.type):
        return _arrow_numbers(feature, column, allow_missing)
    cells: list[object] = column.to_pylist()
    return check_column(feature, cells, allow_missing)


def _is_number(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind))


def _may_pass_float32(values: np.ndarray[Any, Any]) -> bool:
    """Might a number of this float column lie beyond float32's range?  Two reductions
    answer no for most columns without a mask; NaN (a missing value) or infinities send a
    column to the row-by-row look.  Narrower floats cannot hold such numbers."""
    if values.dtype.itemsize <= 4 or not values.size:
        return False
    return not (values.min() >= -FLOAT32_LIMIT and values.max() <= FLOAT32_LIMIT)


def _arrow_numbers(
    feature: FeatureColumn, column: pa.ChunkedArray, allow_missing: bool
) -> tuple[BadCells, np.ndarray[Any, Any] | None]:
    """An Arrow number column for a numeric feature: nulls are missing, NaN and infinities
    refused; float64 (int64 for a complete integer column of an int64 feature)."""
    values = np.asarray(column.to_numpy())  # nulls read as NaN (integers become float64)
    nulls = column.null_count > 0
    missing = np.asarray(column.is_null().to_numpy()) if nulls else None
    bad_rows: list[tuple[int, str]] = []
    n_bad = 0
    if missing is not None and not allow_missing:
        rows = np.flatnonzero(missing)
        n_bad += rows.size
        msg = cannot_be_missing(feature)
        bad_rows += [(row, msg) for row in rows[:MAX_PROBLEMS].tolist()]
    if values.dtype.kind == "f":  # NaN and infinities (not the nulls, read as NaN)
        finite = np.isfinite(values)
        not_finite = ~finite if missing is None else ~finite & ~missing
        rows = np.flatnonzero(not_finite)
        n_bad += rows.size
        shown = rows[:MAX_PROBLEMS].tolist()
        bad_rows += [(r, f"expected a finite number, got {float(values[r])!r}") for r in shown]
        if _may_pass_float32(values):
            rows = np.flatnonzero(finite & (np.abs(values) > FLOAT32_LIMIT))
            n_bad += rows.size
            bad_rows += [
                (r, beyond_float32(float(values[r]))) for r in rows[:MAX_PROBLEMS].tolist()
            ]
    if n_bad:
        bad_rows.sort()
        return (bad_rows[:MAX_PROBLEMS], n_bad), None
    kind = values.dtype.kind
    fits_int64 = kind == "i" or (kind == "u" and values.max() <= _INT64_MAX)
    if fits_int64 and feature.dtype == "int64":
        return ([], 0), values.astype(np.int64, copy=False)
    return ([], 0), values.astype(np.float64, copy=False)
