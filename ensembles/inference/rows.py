"""Checked columns from a request's rows: JSON records or columnar, or an Arrow table.

The first stage of a prediction (see :mod:`ensembles.inference`): the rows as the client
sent them become one numpy array per feature column, in the dtype training used, plus
warnings.  Checked here rather than in :mod:`ensembles.data`: prediction must name
``("instances", row, column)`` in every problem, collect all problems in one answer, and be
fast, so each column is checked by one plain Python loop (or, for numbers, one numpy pass)
and built as one array.

Arrow tables (Arrow IPC or Parquet bodies, read by ``app.bodies``) are held to the JSON
rules, column by column:

* numeric features take integer and floating Arrow columns as they are (float64, or int64
  for a complete integer column of an int64 feature); nulls are missing values (refused
  where training had none), NaN, infinities and numbers beyond float32's range are
  refused, as in JSON;
* any other Arrow type goes through the JSON cell checks (``to_pylist``), so a string in a
  numeric column, a number in a string column or a non-boolean in a boolean column is
  named by row and column, with the same messages (and at most ``MAX_PROBLEMS`` shown);
* categories training never saw are warned of as in JSON (:func:`unseen_categories`).

Every number of a numeric column must lie within float32's range (±3.4028235e+38, the
largest float32 as numpy prints it, which a float32 holds): scikit-learn's trees cast their
input to float32 and refuse what becomes infinite there, and a value no float32 holds is
no more usable by the other models, so every kind is held to the same range, on every body.

Columns a pandas index was stored in (``pa.Table.from_pandas``, ``DataFrame.to_parquet``)
are not instances' columns and are skipped silently, as dataset uploads skip them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain
from typing import Any, Final, NamedTuple

import numpy as np
import pyarrow as pa

from ensembles.builders import NUMERIC_DTYPES, FeatureColumn
from ensembles.errors import PredictionInputError, Problem, TooLargeError, shown
from ensembles.signature import ModelSignature
from ensembles.suggestions import did_you_mean

__all__ = [
    "FLOAT32_LIMIT",
    "MAX_PROBLEMS",
    "CheckedColumns",
    "Columns",
    "check_row_count",
    "check_rows",
    "check_table",
    "input_error",
    "unseen_categories",
]

MAX_PROBLEMS = 50
MAX_UNSEEN_SHOWN = 10  # rows (with their values) an unseen-category warning names
# The largest magnitude taken: float32's largest, as numpy prints it (3.4028235e+38; it
# rounds to np.finfo(np.float32).max, so a client echoing numpy's figure is not refused).
FLOAT32_LIMIT: Final = float(str(np.finfo(np.float32).max))
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {"number": (int, float), "bool": (bool,), "str": (str,)}
_NOUNS = {"number": "a number", "bool": "a boolean", "str": "a string"}
_ABSENT = object()  # a record without the column's key
_SKIP = object()  # a row already refused as a whole: its cells are not checked
_EXACT_INT = 2**53  # from here on an int may not survive a float64 (the careful path: int64)
_NUMBERS = frozenset({float, int})
_INT64_MAX = np.iinfo(np.int64).max
FloatArray = np.ndarray[Any, np.dtype[np.float64]]
Columns = dict[str, np.ndarray[Any, Any]]
# Bad cells of one column: the first MAX_PROBLEMS (row, message) and how many in all.
_Bad = tuple[list[tuple[int, str]], int]


class CheckedColumns(NamedTuple):
    """One numpy array per feature column, in feature order, and the warnings for them
    (a tuple: unpacked at once on every request, it costs nothing to make)."""

    columns: Columns
    warnings: list[str]


# --- JSON rows --------------------------------------------------------------------------

# Raw cells per feature column (before any type check), shape problems, extra columns.
_Cells = tuple[dict[str, list[object]], list[Problem], list[str]]


def check_rows(
    signature: ModelSignature, instances: object, max_rows: int | None = None
) -> CheckedColumns:
    """The checked columns of JSON ``instances`` (records or columnar).

    Every problem is collected (up to ``MAX_PROBLEMS``, in row order) into one
    PredictionInputError, so a client fixes a request in one round trip; more than
    ``max_rows`` rows is a TooLargeError.  Well-formed numeric input (numbers only, at
    most 2**53 in magnitude) goes the fast way: the cells' types are checked in one pass
    over all of them and each column becomes a float64 array at once; anything else takes
    the careful path below, which names every problem (and gives exactly the same arrays
    for well-formed input, but for integer columns, which it keeps as int64: the same
    numbers to every model).
    """
    fast = _numeric_columns(signature, instances, max_rows)
    if fast is not None:
        return CheckedColumns(*fast)
    names = [f.name for f in signature.features]
    columns, shape_problems, extra = _read_instances(instances, names, max_rows)
    # Sort key (row, column position); shape problems name a row (or -1: the whole input).
    keyed = [((next((x for x in p.loc if isinstance(x, int)), -1), -1), p) for p in shape_problems]
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    total = len(shape_problems)
    for position, column in enumerate(signature.features):
        values = columns.get(column.name)
        if values is None:
            continue  # reported as a missing column already
        absent = _missing_column(column.name, extra)
        bad, n_bad = _scan(column, values, signature.accepts_missing(column), absent)
        total += n_bad
        loc = ("instances", column.name)
        keyed += [((row, position), Problem((loc[0], row, loc[1]), msg)) for row, msg in bad]
        if not total:
            arrays[column.name] = _build(column, values)
    if total:
        keyed.sort(key=lambda item: item[0])
        raise input_error("instances", [p for _, p in keyed], total)
    return CheckedColumns(arrays, _extra_warnings(extra) + unseen_categories(signature, arrays))


def _missing_column(name: str, extra: Sequence[str]) -> str:
    """A missing column's message, with the sent column it was likely meant to be."""
    return f"missing column {name!r}{did_you_mean(name, extra)}"


def _extra_warnings(extra: Sequence[str]) -> list[str]:
    return [f"extra columns ignored: {', '.join(extra)}"] if extra else []


def unseen_categories(signature: ModelSignature, columns: Columns) -> list[str]:
    """One warning per encoded column with cells whose category training never saw.

    The encoders take such a cell without complaint (one-hot: all zeros; histogram
    boosting's ordinal codes: missing), so the prediction stands, but the client should
    know that the model knew nothing of that value.  Only the columns listed in
    ``signature.categories`` are looked at (none for numeric-only models, and none for
    signatures stored before categories were recorded).  Rule: one set difference per
    column against ``signature.category_sets`` finds whether anything is unseen (cheaper
    than pandas' or numpy's ``isin``); only then are the rows looked for.  Missing cells
    (NaN) are never unseen categories.  Figures: docs/performance.md.
    """
    known = signature.categories
    if not known:
        return []
    warnings: list[str] = []
    for name, categories in signature.category_sets.items():
        values = columns.get(name)
        if values is None:
            continue
        cells = values.tolist()
        unseen = set(cells).difference(categories)
        if unseen and (unseen := {v for v in unseen if v == v}):  # NaN: a missing cell
            warnings.append(_unseen_warning(name, cells, unseen))
    return warnings


def _unseen_warning(name: str, cells: list[Any], unseen: set[Any]) -> str:
    """``column 'c': 2 rows have categories not seen in training ('x' at row 0, ...)``:
    the first MAX_UNSEEN_SHOWN rows with their values, and how many rows in all."""
    rows = [i for i, v in enumerate(cells) if v in unseen]
    listed = ", ".join(f"{shown(cells[i])} at row {i}" for i in rows[:MAX_UNSEEN_SHOWN])
    if len(rows) > MAX_UNSEEN_SHOWN:
        listed += f", and {len(rows) - MAX_UNSEEN_SHOWN} more rows"
    one = len(rows) == 1
    have = "1 row has a category" if one else f"{len(rows)} rows have categories"
    encoded = "it is" if one else "they are"
    return f"column {name!r}: {have} not seen in training ({listed}); {encoded} encoded as unknown"


def _numeric_columns(
    signature: ModelSignature, instances: object, max_rows: int | None
) -> tuple[Columns, list[str]] | None:
    """The fast path for all-numeric models, or None to take the careful one."""
    features = signature.features
    if not features or any(f.dtype not in NUMERIC_DTYPES for f in features):
        return None
    names = [f.name for f in features]
    if type(instances) is list:
        if not instances or (max_rows is not None and len(instances) > max_rows):
            return None
        return _numeric_records(instances, names)
    if type(instances) is dict and "columns" in instances and "data" in instances:
        data = instances["data"]
        if type(data) is not list or not data or (max_rows is not None and len(data) > max_rows):
            return None
        return _numeric_columnar(instances["columns"], data, names)
    return None


def _numeric_records(records: list[Any], names: list[str]) -> tuple[Columns, list[str]] | None:
    if set(map(type, records)) != {dict}:  # (map and set: one pass in C, not in Python)
        return None
    try:
        cells = [[r[n] for r in records] for n in names]
    except KeyError:
        return None  # a missing column: the careful path names the rows
    table = _floats(cells)  # one row per column
    if table is None:
        return None
    extra: list[str] = []
    if set(map(len, records)) != {len(names)}:
        wanted = set(names)
        extra = list(dict.fromkeys(str(k) for r in records for k in r if k not in wanted))
    return dict(zip(names, table, strict=True)), _extra_warnings(extra)


def _numeric_columnar(
    header: object, data: list[Any], names: list[str]
) -> tuple[Columns, list[str]] | None:
    if type(header) is not list or any(type(c) is not str for c in header):
        return None
    position = {c: j for j, c in enumerate(header)}
    if len(position) != len(header) or any(n not in position for n in names):
        return None
    if set(map(type, data)) != {list} or set(map(len, data)) != {len(header)}:
        return None
    table = _floats(data)  # one row per row
    if table is None:
        return None
    wanted = set(names)
    extra = [c for c in header if c not in wanted]
    return {n: table[:, position[n]] for n in names}, _extra_warnings(extra)


def _floats(nested: list[list[Any]]) -> FloatArray | None:
    """Equal-length lists of cells as one 2-D float64 array, if every cell is a number
    (int or float, never bool or None) that is finite and exact in a float64.

    numpy infers the type while it copies (one pass in C instead of a type check per
    cell in Python): a float or int array means every cell was a number or a bool
    (strings, None, huge ints and nested lists give other dtypes or fail).  Bools become
    0 or 1, so only cells equal to 0 or 1 are looked at again.  A magnitude of 2**53 or
    more may be an int that a float64 rounds, so it takes the careful path too.
    """
    try:
        table = np.array(nested)
    except (OverflowError, ValueError, TypeError):
        return None
    if table.ndim != 2 or table.dtype.kind not in "fi":
        return None
    table = table.astype(np.float64, copy=False)
    if not table.size or not np.isfinite(table).all():
        return None
    if np.abs(table).max() >= _EXACT_INT or _has_bools(nested, table):
        return None
    return table


def _has_bools(nested: list[list[Any]], table: FloatArray) -> bool:
    """Was any cell of ``table`` (built from ``nested``) a bool rather than a number?"""
    candidates = np.flatnonzero((table == 0) | (table == 1))
    if 8 * candidates.size > table.size:  # mostly zeros and ones: look at every cell
        types = set(map(type, chain.from_iterable(nested)))
        return not types <= _NUMBERS and any(issubclass(t, bool | np.bool_) for t in types)
    rows, columns = np.divmod(candidates, table.shape[1])
    return any(
        isinstance(nested[i][j], bool | np.bool_)
        for i, j in zip(rows.tolist(), columns.tolist(), strict=True)
    )


def _read_instances(instances: object, names: Sequence[str], max_rows: int | None) -> _Cells:
    """Records or columnar input -> cells per feature column, plus shape problems."""
    if isinstance(instances, list):
        check_row_count(len(instances), max_rows)
        return _from_records(instances, names)
    if isinstance(instances, dict) and "columns" in instances and "data" in instances:
        data = instances["data"]
        if isinstance(data, list):
            check_row_count(len(data), max_rows)
        return _from_columnar(instances["columns"], data, names)
    msg = 'expected a list of records or {"columns": [...], "data": [[...], ...]}'
    raise PredictionInputError("instances have the wrong shape", [Problem(("instances",), msg)])


def check_row_count(n_rows: int, max_rows: int | None) -> None:
    """At least one row and at most ``max_rows`` (413 above, as TooLargeError)."""
    if max_rows is not None and n_rows > max_rows:
        msg = f"{n_rows} rows; at most {max_rows} rows per request"
        raise TooLargeError("too many rows in one request", [Problem(("instances",), msg)])
    if n_rows == 0:
        msg = "no instances: send at least one row"
        raise PredictionInputError("no instances", [Problem(("instances",), msg)])


def _from_records(records: list[object], names: Sequence[str]) -> _Cells:
    wanted = set(names)
    problems: list[Problem] = []
    extra: dict[str, None] = {}
    rows: list[dict[Any, Any] | None] = []
    for i, record in enumerate(records):
        rows.append(record if isinstance(record, dict) else None)
        if isinstance(record, dict):
            extra.update(dict.fromkeys(str(k) for k in record if k not in wanted))
        else:
            problems.append(Problem(("instances", i), f"expected an object, got {shown(record)}"))
    columns = {n: [_SKIP if r is None else r.get(n, _ABSENT) for r in rows] for n in names}
    return columns, problems, list(extra)


def _from_columnar(header: object, data: object, names: Sequence[str]) -> _Cells:
    problems: list[Problem] = []
    if not isinstance(header, list) or not all(isinstance(c, str) for c in header):
        problems.append(Problem(("instances", "columns"), "expected a list of column names"))
    if not isinstance(data, list):
        problems.append(Problem(("instances", "data"), "expected a list of rows (lists of values)"))
    if problems or not isinstance(header, list) or not isinstance(data, list):
        return {}, problems, []
    position: dict[str, int] = {}
    for j, name in enumerate(header):
        if name in position:
            problems.append(Problem(("instances", "columns"), f"duplicate column {name!r}"))
        position.setdefault(name, j)
    missing = [n for n in names if n not in position]
    extra = [c for c in position if c not in set(names)]
    problems += [Problem(("instances", "columns"), _missing_column(n, extra)) for n in missing]
    rows: list[list[Any] | None] = []
    for i, row in enumerate(data):
        ok = isinstance(row, list) and len(row) == len(header)
        rows.append(row if ok else None)
        if not ok:
            got = f"{len(row)} values" if isinstance(row, list) else shown(row)
            msg = f"expected a list of {len(header)} values (one per column), got {got}"
            problems.append(Problem(("instances", "data", i), msg))
    columns = {
        n: [_SKIP if r is None else r[position[n]] for r in rows] for n in names if n in position
    }
    return columns, problems, extra


def _family(column: FeatureColumn) -> str:
    """Which JSON values a column takes (builders treat every non-numeric as a category)."""
    if column.dtype in NUMERIC_DTYPES:
        return "number"
    return "bool" if column.dtype == "bool" else "str"


def _scan(
    column: FeatureColumn, cells: list[object], allow_missing: bool, absent: str = ""
) -> tuple[list[tuple[int, str]], int]:
    """The first MAX_PROBLEMS bad cells of one column (row, message) and how many in all.

    Only the first MAX_PROBLEMS of a column can be among the first MAX_PROBLEMS overall in
    row order, so keeping more would only cost memory on a huge bad request.
    """
    family = _family(column)
    plain = _PLAIN_TYPES[family]
    missing = _cannot_be_missing(column)
    bad: list[tuple[int, str]] = []
    n_bad = 0
    for row, value in enumerate(cells):
        kind = type(value)
        if kind in plain:
            msg = _number_problem(value) if family == "number" else None
        elif value is None:
            msg = None if allow_missing else missing
        elif value is _SKIP:
            msg = None
        elif value is _ABSENT:
            msg = absent or f"missing column {column.name!r}"
        else:
            msg = _unusual_value_problem(value, family)
        if msg is not None:
            n_bad += 1
            if len(bad) < MAX_PROBLEMS:
                bad.append((row, msg))
    return bad, n_bad


def _cannot_be_missing(column: FeatureColumn) -> str:
    return (
        f"column {column.name!r} cannot be missing for this model"
        " (it had no missing values in training)"
    )


def _number_problem(value: object) -> str | None:
    """JSON allows NaN, Infinity and huge numbers; none of them is a usable feature value."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    if isinstance(value, int | float) and not -FLOAT32_LIMIT <= value <= FLOAT32_LIMIT:
        return _beyond_float32(value)
    return None


def _beyond_float32(value: float) -> str:
    return (
        f"expected a number between {-FLOAT32_LIMIT!r} and {FLOAT32_LIMIT!r} (float32's "
        f"range, which the models compute in), got {shown(value)}"
    )


def _unusual_value_problem(value: object, family: str) -> str | None:
    """Subclasses and numpy scalars (Python callers); bool is never a number."""
    is_bool = isinstance(value, bool | np.bool_)
    number = isinstance(value, int | float | np.integer | np.floating) and not is_bool
    if family == "number" and number:
        return _number_problem(value if isinstance(value, int) else float(value))  # type: ignore[arg-type]
    accepted = is_bool if family == "bool" else family == "str" and isinstance(value, str)
    return None if accepted else f"expected {_NOUNS[family]}, got {shown(value)}"


def _build(column: FeatureColumn, cells: list[object]) -> np.ndarray[Any, Any]:
    """Checked cells -> the dtype training used (see ensembles.data.to_model_frame)."""
    family = _family(column)
    if family == "number":
        if column.dtype == "int64" and all(type(v) is int for v in cells):
            try:
                return np.array(cells, dtype=np.int64)
            except OverflowError:
                pass  # beyond int64: a float column, as pandas would make it
        return np.array(cells, dtype=np.float64)  # None -> NaN
    out = np.empty(len(cells), dtype=object)
    if family == "bool":
        out[:] = [np.nan if v is None else bool(v) for v in cells]
    else:
        out[:] = [np.nan if v is None else v for v in cells]
    return out


def input_error(what: str, problems: list[Problem], total: int) -> PredictionInputError:
    """One error for every problem of the ``what`` (the first MAX_PROBLEMS shown)."""
    shown = problems[:MAX_PROBLEMS]
    more = f" (first {MAX_PROBLEMS} shown)" if total > MAX_PROBLEMS else ""
    plural = "s" if total != 1 else ""
    return PredictionInputError(f"{total} problem{plural} in the {what}{more}", shown)


# --- Arrow tables ---------------------------------------------------------------------


def check_table(
    signature: ModelSignature, table: pa.Table, max_rows: int | None = None
) -> CheckedColumns:
    """The checked columns of an Arrow table's rows; every problem at once, as
    :func:`check_rows` reports them (PredictionInputError; TooLargeError over ``max_rows``)."""
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
    wanted = {f.name for f in signature.features}
    for j, feature in enumerate(signature.features):
        index = position.get(feature.name)
        column = None if index is None else table.column(index)
        absent = _missing_column(feature.name, [c for c in position if c not in wanted])
        (bad, n_bad), array = _read_column(feature, column, table.num_rows, signature, absent)
        total += n_bad
        keyed += [((row, j), Problem(("instances", row, feature.name), msg)) for row, msg in bad]
        if not total and array is not None:
            arrays[feature.name] = array
    if total:
        keyed.sort(key=lambda item: item[0])
        raise input_error("instances", [p for _, p in keyed], total)
    extra = _extra_warnings([c for c in position if c not in wanted])
    return CheckedColumns(arrays, extra + unseen_categories(signature, arrays))


def _pandas_index_columns(schema: pa.Schema) -> set[str]:
    index = (schema.pandas_metadata or {}).get("index_columns") or []
    return {c for c in index if isinstance(c, str)}  # a RangeIndex is a dict: no column


def _read_column(
    feature: FeatureColumn,
    column: pa.ChunkedArray | None,
    n_rows: int,
    signature: ModelSignature,
    absent: str,
) -> tuple[_Bad, np.ndarray[Any, Any] | None]:
    """The bad cells of one feature column and, when there are none, its array."""
    allow_missing = signature.accepts_missing(feature)
    if column is None:
        return _scan(feature, [_ABSENT] * n_rows, allow_missing, absent), None
    if feature.dtype in NUMERIC_DTYPES and _is_number(column.type):
        return _arrow_numbers(feature, column, allow_missing)
    cells: list[object] = column.to_pylist()
    bad = _scan(feature, cells, allow_missing)
    return bad, None if bad[1] else _build(feature, cells)


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
                (r, _beyond_float32(float(values[r]))) for r in rows[:MAX_PROBLEMS].tolist()
            ]
    if n_bad:
        bad_rows.sort()
        return (bad_rows[:MAX_PROBLEMS], n_bad), None
    kind = values.dtype.kind
    fits_int64 = kind == "i" or (kind == "u" and values.max() <= _INT64_MAX)
    if fits_int64 and feature.dtype == "int64":
        return ([], 0), values.astype(np.int64, copy=False)
    return ([], 0), values.astype(np.float64, copy=False)
