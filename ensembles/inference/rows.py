"""Checked columns from a request's JSON rows: records or columnar.

The first stage of a prediction (see :mod:`ensembles.inference`): the rows as the client
sent them become one numpy array per feature column, in the dtype training used, plus
warnings.  Checked here rather than in :mod:`ensembles.data`: prediction must name
``("instances", row, column)`` in every problem, collect all problems in one answer, and be
fast, so each column is checked in one pass in C (numpy's type inference, or the set of
its cells' types) and built as one array, and cell by cell only where a cell may be bad,
to name it (:mod:`ensembles.inference.cells`).  Columnar numbers may come already read
into one float64 matrix (``{"columns": [...], "data": matrix}``, by ``app.json_numbers``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain
from operator import itemgetter, methodcaller
from typing import Any

import numpy as np

from ensembles.errors import PredictionInputError, Problem, shown
from ensembles.inference.cells import (
    ABSENT,
    SKIP,
    CheckedColumns,
    Columns,
    MatrixColumns,
    check_column,
    check_row_count,
    extra_warnings,
    input_error,
    missing_column_message,
    unseen_categories,
)
from ensembles.signature import ModelSignature

__all__ = ["check_records_together", "check_rows", "exact_floats", "numbers_only"]

_EXACT_INT = 2**53  # from here on an int may not survive a float64 (the careful path: int64)
_NUMBERS = frozenset({float, int})
_FEW_RECORDS = 16  # up to this many records, every cell's type is looked at (_few_floats)
FloatArray = np.ndarray[Any, np.dtype[np.float64]]
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
        absent = missing_column_message(column.name, extra)
        allow_missing = signature.accepts_missing(column)
        (bad, n_bad), array = check_column(column, values, allow_missing, absent)
        total += n_bad
        loc = ("instances", column.name)
        keyed += [((row, position), Problem((loc[0], row, loc[1]), msg)) for row, msg in bad]
        if array is not None:
            arrays[column.name] = array
    if total:
        keyed.sort(key=lambda item: item[0])
        raise input_error("instances", [p for _, p in keyed], total)
    return CheckedColumns(arrays, extra_warnings(extra) + unseen_categories(signature, arrays))


def check_records_together(
    signature: ModelSignature, records: Sequence[object]
) -> CheckedColumns | None:
    """The checked columns of several one-record requests at once (``records``: each
    request's only record, in order; one row each), or None unless every one of them,
    checked alone by :func:`check_rows`, would take its fast path without a warning.

    For one-row requests batched on the event loop (``app.batching``): one type check
    and one array for all of them, where each request paid a :func:`check_rows` of its
    own (~34 us of ~290 at 16 clients, issue 24).  The rows are those :func:`check_rows`
    gives each alone, stacked, to the bit: a record holding exactly the feature names
    (no extra column, so no warning) of cells that are all ints or floats passes the
    type check together iff each passes it alone; numpy reads a Python int exactly
    into a float64 below 2**53 whether its row holds floats or not (alone, an all-int
    row goes through int64 first: the same numbers); and the largest magnitude of the
    stack is below 2**53 (finite) iff each row's is.  None: check each alone (its own
    problems, warnings and dtypes), as before.
    """
    names = signature.feature_names
    if not signature.numbers_only or not records or not names:
        return None
    if set(map(type, records)) != {dict}:
        return None
    rows: Sequence[dict[str, Any]] = records  # type: ignore[assignment]  # (all dicts)
    if set(map(len, rows)) != {len(names)}:
        return None
    try:
        table = _few_floats(list(map(_cells_of(tuple(names)), rows)))
    except KeyError:
        return None  # a missing column (then an extra one too): the careful path
    if table is None:
        return None
    return CheckedColumns(MatrixColumns(names, table), extra_warnings([]))


def numbers_only(signature: ModelSignature) -> bool:
    """Does the model take numbers only (so a cell's JSON type beyond "number" is moot)?"""
    return signature.numbers_only


def _numeric_columns(
    signature: ModelSignature, instances: object, max_rows: int | None
) -> tuple[Columns, list[str]] | None:
    """The fast path for all-numeric models, or None to take the careful one."""
    if not signature.numbers_only:
        return None
    names = signature.feature_names
    if type(instances) is list:
        if not instances or (max_rows is not None and len(instances) > max_rows):
            return None
        return _numeric_records(instances, names)
    if type(instances) is dict and "columns" in instances and "data" in instances:
        data = instances["data"]
        if type(data) not in (list, np.ndarray) or not len(data):
            return None
        if max_rows is not None and len(data) > max_rows:
            return None
        return _numeric_columnar(instances["columns"], data, names)
    return None


def _numeric_records(records: list[Any], names: Sequence[str]) -> tuple[Columns, list[str]] | None:
    if set(map(type, records)) != {dict}:  # (map and set: one pass in C, not in Python)
        return None
    try:
        if len(records) == 1:  # one C call for the record's cells: one row, one column each
            table = _few_floats([_cells_of(tuple(names))(records[0])])
        else:
            cells = [[r[n] for r in records] for n in names]
            few = len(records) <= _FEW_RECORDS
            by_column = _few_floats(cells) if few else _floats(cells)  # one row per column
            table = None if by_column is None else by_column.T
    except KeyError:
        return None  # a missing column: the careful path names the rows
    if table is None:
        return None
    extra: list[str] = []
    if set(map(len, records)) != {len(names)}:
        wanted = set(names)
        extra = list(dict.fromkeys(str(k) for r in records for k in r if k not in wanted))
    return MatrixColumns(names, table), extra_warnings(extra)


def _numeric_columnar(
    header: object, data: list[Any] | np.ndarray[Any, Any], names: Sequence[str]
) -> tuple[Columns, list[str]] | None:
    if type(header) is not list or any(type(c) is not str for c in header):
        return None
    position = {c: j for j, c in enumerate(header)}
    if len(position) != len(header) or any(n not in position for n in names):
        return None
    if isinstance(data, np.ndarray):
        table = _float_matrix(data, len(header))
    elif set(map(type, data)) != {list} or set(map(len, data)) != {len(header)}:
        return None
    else:
        table = _floats(data)  # one row per row
    if table is None:
        return None
    wanted = set(names)
    extra = [c for c in header if c not in wanted]
    return {n: table[:, position[n]] for n in names}, extra_warnings(extra)


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
    if not table.size or not exact_floats(table) or _has_bools(nested, table):
        return None
    return table


@lru_cache(maxsize=256)
def _cells_of(names: tuple[str, ...]) -> Callable[[dict[str, Any]], Sequence[Any]]:
    """A record's cells in the order of ``names``, read in one call (KeyError: missing)."""
    if len(names) == 1:
        name = names[0]
        return lambda record: (record[name],)
    return itemgetter(*names)


def _few_floats(nested: Sequence[Sequence[Any]]) -> FloatArray | None:
    """:func:`_floats` for a few rows (one-row requests): every cell's type is looked at
    at once, so a bool (or anything but an int or a float) is refused before numpy reads
    the cells, and one comparison holds both rules on the values (NaN and infinities
    fail ``< 2**53`` as they fail ``isfinite``)."""
    if not set(map(type, chain.from_iterable(nested))) <= _NUMBERS:
        return None
    try:
        table = np.array(nested)
    except (OverflowError, ValueError, TypeError):
        return None
    if table.ndim != 2 or table.dtype.kind not in "fi" or not table.size:
        return None
    table = table.astype(np.float64, copy=False)
    return table if np.abs(table).max() < _EXACT_INT else None


def _float_matrix(data: np.ndarray[Any, Any], n_columns: int) -> FloatArray | None:
    """Rows already read as numbers (``app.json_numbers``), held to :func:`_floats`'s
    rules: float64, one column per name, finite and exact in a float64."""
    if data.dtype != np.float64 or data.ndim != 2 or data.shape[1] != n_columns:
        return None
    return data if data.size and exact_floats(data) else None


def exact_floats(table: FloatArray) -> bool:
    """Is every value of the non-empty ``table`` finite and below 2**53 in magnitude?

    Two reductions and no temporary: NaN makes the minimum and the maximum NaN, which
    fails both comparisons, as an infinity fails one.  (``isfinite`` then ``abs().max()``
    made two arrays of the table's size: 0.6 ms of a 10,000-row request of 30 columns.)
    """
    return bool(table.min() > -_EXACT_INT and table.max() < _EXACT_INT)


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
        if isinstance(data, np.ndarray):  # numbers read straight into a matrix: as JSON
            data = data.tolist()
        if isinstance(data, list):
            check_row_count(len(data), max_rows)
        return _from_columnar(instances["columns"], data, names)
    msg = 'expected a list of records or {"columns": [...], "data": [[...], ...]}'
    raise PredictionInputError("instances have the wrong shape", [Problem(("instances",), msg)])


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
    if problems:
        columns = {n: [SKIP if r is None else r.get(n, ABSENT) for r in rows] for n in names}
    else:  # every row a record: one C call per cell (dict.get), no Python step
        columns = {n: list(map(methodcaller("get", n, ABSENT), records)) for n in names}
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
    problems += [
        Problem(("instances", "columns"), missing_column_message(n, extra)) for n in missing
    ]
    wanted = [n for n in names if n in position]
    if set(map(type, data)) == {list} and set(map(len, data)) == {len(header)}:
        # Every row well formed: one transposition in C instead of a step per cell.
        by_column = list(zip(*data, strict=True))
        return {n: list(by_column[position[n]]) for n in wanted}, problems, extra
    rows: list[list[Any] | None] = []
    for i, row in enumerate(data):
        ok = isinstance(row, list) and len(row) == len(header)
        rows.append(row if ok else None)
        if not ok:
            got = f"{len(row)} values" if isinstance(row, list) else shown(row)
            msg = f"expected a list of {len(header)} values (one per column), got {got}"
            problems.append(Problem(("instances", "data", i), msg))
    columns = {n: [SKIP if r is None else r[position[n]] for r in rows] for n in wanted}
    return columns, problems, extra
