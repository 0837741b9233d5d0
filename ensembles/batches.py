"""Batches of rows as Arrow tables (read from Arrow IPC or Parquet) -> checked numpy columns.

The table's columns are the instances: column names are feature names, other columns
are ignored and reported, and nulls are missing values.  Each feature column is checked
as :mod:`ensembles.prediction` checks JSON cells, with the same messages at the same
places (``("instances", row, column)``), so a client that switches from JSON to a table
gets the same answers and the same problems:

* a numeric feature sent as an Arrow integer or floating column goes straight into
  numpy (without a copy for float64 columns without nulls): nulls are missing values
  (refused where the model had none in training), NaN and infinities are refused as
  JSON's ``NaN``/``Infinity`` are, and a complete integer column stays int64 for an
  int64 feature, as JSON integers do;
* every other column (strings, booleans, a string column for a numeric feature, ...)
  becomes Python values and takes the JSON cells' careful path, so a column of the
  wrong type is refused row by row with the value shown;
* a feature column absent from the table is missing in every row, as a key absent from
  every record is (``"missing column 'x'"`` at each row, the first ``MAX_PROBLEMS``
  shown);
* categories training never saw are warned of as in JSON (``unseen_categories``).

Columns a pandas index was stored in (``pa.Table.from_pandas``, ``DataFrame.to_parquet``)
are not instances' columns and are skipped silently, as dataset uploads skip them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ensembles.builders import NUMERIC_DTYPES, FeatureColumn
from ensembles.errors import Problem
from ensembles.prediction import (
    _ABSENT,
    MAX_PROBLEMS,
    Columns,
    _build,
    _cannot_be_missing,
    _extra_warnings,
    _input_error,
    _scan,
    check_row_count,
    unseen_categories,
)
from ensembles.signature import ModelSignature

__all__ = ["table_to_columns"]

_INT64_MAX = np.iinfo(np.int64).max
# Bad cells of one column: the first MAX_PROBLEMS (row, message) and how many in all.
_Bad = tuple[list[tuple[int, str]], int]


def table_to_columns(
    signature: ModelSignature, table: pa.Table, max_rows: int | None = None
) -> tuple[Columns, list[str]]:
    """One numpy array per feature column (in feature order) for the rows of ``table``,
    and warnings; every problem at once, as :func:`~ensembles.prediction.rows_to_columns`
    reports them (PredictionInputError; TooLargeError over ``max_rows``)."""
    check_row_count(table.num_rows, max_rows)
    skipped = _pandas_index_columns(table.schema)
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
    arrays: Columns = {}
    for j, feature in enumerate(signature.features):
        index = position.get(feature.name)
        column = None if index is None else table.column(index)
        (bad, n_bad), array = _read(feature, column, table.num_rows, signature)
        total += n_bad
        keyed += [((row, j), Problem(("instances", row, feature.name), msg)) for row, msg in bad]
        if not total and array is not None:
            arrays[feature.name] = array
    if total:
        keyed.sort(key=lambda item: item[0])
        raise _input_error("instances", [p for _, p in keyed], total)
    wanted = {f.name for f in signature.features}
    extra = _extra_warnings([c for c in position if c not in wanted])
    return arrays, extra + unseen_categories(signature, arrays)


def _pandas_index_columns(schema: pa.Schema) -> set[str]:
    index = (schema.pandas_metadata or {}).get("index_columns") or []
    return {c for c in index if isinstance(c, str)}  # a RangeIndex is a dict: no column


def _read(
    feature: FeatureColumn,
    column: pa.ChunkedArray | None,
    n_rows: int,
    signature: ModelSignature,
) -> tuple[_Bad, np.ndarray[Any, Any] | None]:
    """The bad cells of one feature column and, when there are none, its array."""
    allow_missing = signature.accepts_missing(feature)
    if column is None:
        return _scan(feature, [_ABSENT] * n_rows, allow_missing), None
    if feature.dtype in NUMERIC_DTYPES and _is_number(column.type):
        return _numbers(feature, column, allow_missing)
    cells: list[object] = column.to_pylist()
    bad = _scan(feature, cells, allow_missing)
    return bad, None if bad[1] else _build(feature, cells)


def _is_number(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind))


def _numbers(
    feature: FeatureColumn, column: pa.ChunkedArray, allow_missing: bool
) -> tuple[_Bad, np.ndarray[Any, Any] | None]:
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
        msg = _cannot_be_missing(feature)
        bad_rows += [(row, msg) for row in rows[:MAX_PROBLEMS].tolist()]
    if values.dtype.kind == "f":  # NaN and infinities (not the nulls, read as NaN)
        not_finite = ~np.isfinite(values)
        if missing is not None:
            not_finite &= ~missing
        rows = np.flatnonzero(not_finite)
        n_bad += rows.size
        shown = rows[:MAX_PROBLEMS].tolist()
        bad_rows += [(r, f"expected a finite number, got {float(values[r])!r}") for r in shown]
    if n_bad:
        bad_rows.sort()
        return (bad_rows[:MAX_PROBLEMS], n_bad), None
    kind = values.dtype.kind
    fits_int64 = kind == "i" or (kind == "u" and values.max() <= _INT64_MAX)
    if fits_int64 and feature.dtype == "int64":
        return ([], 0), values.astype(np.int64, copy=False)
    return ([], 0), values.astype(np.float64, copy=False)
