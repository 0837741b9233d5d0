"""The checks every body of instances shares: one column's cells against its feature.

JSON rows (:mod:`ensembles.inference.rows`) and Arrow tables
(:mod:`ensembles.inference.tables`) both end here, so a bad cell gets the same message
whichever way it came, and every problem is named ``("instances", row, column)``.

Every number of a numeric column must lie within float32's range (±3.4028235e+38, the
largest float32 as numpy prints it, which a float32 holds): scikit-learn's trees cast their
input to float32 and refuse what becomes infinite there, and a value no float32 holds is
no more usable by the other models, so every kind is held to the same range, on every body.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import numpy as np

from ensembles.builders import NUMERIC_DTYPES, FeatureColumn
from ensembles.errors import PredictionInputError, Problem, TooLargeError, shown
from ensembles.signature import ModelSignature
from ensembles.suggestions import did_you_mean

__all__ = [
    "ABSENT",
    "FLOAT32_LIMIT",
    "MAX_PROBLEMS",
    "SKIP",
    "BadCells",
    "CheckedColumns",
    "Columns",
    "MatrixColumns",
    "MatrixRows",
    "beyond_float32",
    "build_array",
    "cannot_be_missing",
    "check_column",
    "check_row_count",
    "clean_array",
    "extra_warnings",
    "input_error",
    "missing_column_message",
    "scan_cells",
    "unseen_categories",
    "value_family",
]

MAX_PROBLEMS = 50
MAX_UNSEEN_SHOWN = 10  # rows (with their values) an unseen-category warning names
# The largest magnitude taken: float32's largest, as numpy prints it (3.4028235e+38; it
# rounds to np.finfo(np.float32).max, so a client echoing numpy's figure is not refused).
FLOAT32_LIMIT: Final = float(str(np.finfo(np.float32).max))
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {"number": (int, float), "bool": (bool,), "str": (str,)}
_NOUNS = {"number": "a number", "bool": "a boolean", "str": "a string"}
_NONE = type(None)
_NUMBERS_OR_NONE = frozenset({int, float, _NONE})
FloatArray = np.ndarray[Any, np.dtype[np.float64]]
ABSENT = object()  # a record without the column's key
SKIP = object()  # a row already refused as a whole: its cells are not checked
Columns = dict[str, np.ndarray[Any, Any]]


class MatrixColumns(dict[str, np.ndarray[Any, Any]]):
    """Checked columns that are the columns of one float64 matrix, in their order (the
    records of a request read into one table): a model that takes exactly these columns
    stacked in this order copies the matrix in one C call instead of stacking them again
    (one row of 30 columns: a concatenation of 30 arrays, most of the stacking's 8 us).
    Any change to the dict forgets the matrix, so it never stands for other columns."""

    __slots__ = ("matrix", "names")

    def __init__(self, names: Sequence[str], matrix: np.ndarray[Any, Any]) -> None:
        """``matrix``: one row per row, one column per name (its columns are the dict's
        arrays, views of it)."""
        super().__init__(zip(names, matrix.T, strict=True))
        self.names: tuple[str, ...] | None = tuple(names)
        self.matrix: np.ndarray[Any, Any] | None = matrix

    def _forget(self) -> None:
        self.names = self.matrix = None

    def __setitem__(self, key: str, value: np.ndarray[Any, Any]) -> None:
        self._forget()
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._forget()
        super().__delitem__(key)

    def __ior__(self, other: Any) -> MatrixColumns:  # type: ignore[override,misc]
        self._forget()
        return super().__ior__(other)

    def clear(self) -> None:
        self._forget()
        super().clear()

    def pop(self, *args: Any) -> Any:
        self._forget()
        return super().pop(*args)

    def popitem(self) -> tuple[str, np.ndarray[Any, Any]]:
        self._forget()
        return super().popitem()

    def setdefault(self, *args: Any) -> Any:
        self._forget()
        return super().setdefault(*args)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._forget()
        super().update(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))  # a plain dict of the same arrays


class MatrixRows(NamedTuple):
    """Checked rows not yet made columns: ``matrix`` (float64, a row per row, a column
    per name, in the names' order) and the ``names``.  A one-row Arrow request batched
    on the event loop is joined by its matrix alone: making its 30 column views
    (:class:`MatrixColumns`) cost it 7 us of CPU, more than the rest of its check
    (issue 24).  :meth:`columns` makes them, where a request is answered alone."""

    names: tuple[str, ...]
    matrix: np.ndarray[Any, Any]

    def columns(self) -> MatrixColumns:
        return MatrixColumns(self.names, self.matrix)


# Bad cells of one column: the first MAX_PROBLEMS (row, message) and how many in all.
BadCells = tuple[list[tuple[int, str]], int]


class CheckedColumns(NamedTuple):
    """One numpy array per feature column, in feature order, and the warnings for them
    (a tuple: unpacked at once on every request, it costs nothing to make)."""

    columns: Columns
    warnings: list[str]


def missing_column_message(name: str, extra: Sequence[str]) -> str:
    """A missing column's message, with the sent column it was likely meant to be."""
    return f"missing column {name!r}{did_you_mean(name, extra)}"


def extra_warnings(extra: Sequence[str]) -> list[str]:
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


def check_row_count(n_rows: int, max_rows: int | None) -> None:
    """At least one row and at most ``max_rows`` (413 above, as TooLargeError)."""
    if max_rows is not None and n_rows > max_rows:
        msg = f"{n_rows} rows; at most {max_rows} rows per request"
        raise TooLargeError("too many rows in one request", [Problem(("instances",), msg)])
    if n_rows == 0:
        msg = "no instances: send at least one row"
        raise PredictionInputError("no instances", [Problem(("instances",), msg)])


def value_family(column: FeatureColumn) -> str:
    """Which JSON values a column takes (builders treat every non-numeric as a category)."""
    if column.dtype in NUMERIC_DTYPES:
        return "number"
    return "bool" if column.dtype == "bool" else "str"


def scan_cells(
    column: FeatureColumn, cells: list[object], allow_missing: bool, absent: str = ""
) -> tuple[list[tuple[int, str]], int]:
    """The first MAX_PROBLEMS bad cells of one column (row, message) and how many in all.

    Only the first MAX_PROBLEMS of a column can be among the first MAX_PROBLEMS overall in
    row order, so keeping more would only cost memory on a huge bad request.
    """
    family = value_family(column)
    plain = _PLAIN_TYPES[family]
    missing = cannot_be_missing(column)
    bad: list[tuple[int, str]] = []
    n_bad = 0
    for row, value in enumerate(cells):
        kind = type(value)
        if kind in plain:
            msg = _number_problem(value) if family == "number" else None
        elif value is None:
            msg = None if allow_missing else missing
        elif value is SKIP:
            msg = None
        elif value is ABSENT:
            msg = absent or f"missing column {column.name!r}"
        else:
            msg = _unusual_value_problem(value, family)
        if msg is not None:
            n_bad += 1
            if len(bad) < MAX_PROBLEMS:
                bad.append((row, msg))
    return bad, n_bad


def cannot_be_missing(column: FeatureColumn) -> str:
    return (
        f"column {column.name!r} cannot be missing for this model"
        " (it had no missing values in training)"
    )


def _number_problem(value: object) -> str | None:
    """JSON allows NaN, Infinity and huge numbers; none of them is a usable feature value."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    if isinstance(value, int | float) and not -FLOAT32_LIMIT <= value <= FLOAT32_LIMIT:
        return beyond_float32(value)
    return None


def beyond_float32(value: float) -> str:
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


def check_column(
    column: FeatureColumn, cells: Sequence[object], allow_missing: bool, absent: str = ""
) -> tuple[BadCells, np.ndarray[Any, Any] | None]:
    """One column's bad cells and, when there are none, its array.

    Rule: one pass in C finds whether every cell is fine (:func:`clean_array`); only a
    column where some cell may not be is scanned cell by cell, to name each bad one.
    Figures: docs/performance.md.
    """
    array = clean_array(column, cells, allow_missing)
    if array is not None:
        return ([], 0), array
    bad = scan_cells(column, list(cells), allow_missing, absent)
    if bad[1] or any(cell is SKIP for cell in cells):
        return bad, None  # the request is refused: no array is needed
    return bad, build_array(column, list(cells))


def clean_array(
    column: FeatureColumn, cells: Sequence[object], allow_missing: bool
) -> np.ndarray[Any, Any] | None:
    """The column's array (as :func:`build_array` makes it) if every cell is a plain value
    of its family, found without a Python step per cell; None when some cell may be bad
    (or is of an unusual type), for :func:`scan_cells` to judge one by one."""
    if value_family(column) == "number":
        return _clean_numbers(column, cells, allow_missing)
    types = set(map(type, cells))
    missing = _NONE in types
    types.discard(_NONE)
    if (missing and not allow_missing) or not types <= set(_PLAIN_TYPES[value_family(column)]):
        return None
    if missing:
        return build_array(column, list(cells))
    out = np.empty(len(cells), dtype=object)
    out[:] = cells
    return out


def _clean_numbers(
    column: FeatureColumn, cells: Sequence[object], allow_missing: bool
) -> np.ndarray[Any, Any] | None:
    """numpy infers the cells' type while it copies them: int or float means numbers (or
    bools, looked for among the zeros and ones), anything else a closer look.  A column
    with missing values (None) is an object array: its types are then listed once."""
    try:
        values: np.ndarray[Any, Any] | None = np.array(cells)
    except (OverflowError, ValueError, TypeError):
        return None
    if values is None or values.ndim != 1:
        return None
    if values.dtype == object:
        values = _numbers_with_missing(cells, allow_missing)
        if values is None:
            return None
    elif values.dtype.kind not in "fi" or _has_bools(cells, values):
        return None
    elif values.dtype.kind == "f" and np.isnan(values).any():
        return None  # a NaN cell (only Python callers can send one): named by the scan
    with np.errstate(invalid="ignore"):
        if (np.abs(values) >= FLOAT32_LIMIT).any():  # infinities too; the scan decides
            return None
    if column.dtype == "int64" and values.dtype.kind == "i" and set(map(type, cells)) == {int}:
        return values.astype(np.int64, copy=False)  # every cell an int: as build_array
    return values.astype(np.float64, copy=False)


def _numbers_with_missing(cells: Sequence[object], allow_missing: bool) -> FloatArray | None:
    """Numbers and None (NaN), if the column may miss values and holds nothing else."""
    types = set(map(type, cells))
    if not allow_missing or _NONE not in types or not types <= _NUMBERS_OR_NONE:
        return None
    try:
        values = np.array(cells, dtype=np.float64)
    except (OverflowError, ValueError, TypeError):
        return None
    if np.count_nonzero(np.isnan(values)) != cells.count(None):
        return None  # a NaN cell besides the missing ones
    return values


def _has_bools(cells: Sequence[object], values: np.ndarray[Any, Any]) -> bool:
    """Was any cell a bool (which numpy reads as 0 or 1) rather than a number?"""
    candidates = np.flatnonzero((values == 0) | (values == 1))
    if 8 * candidates.size > values.size:  # mostly zeros and ones: list every type
        return any(issubclass(t, bool | np.bool_) for t in set(map(type, cells)))
    return any(isinstance(cells[i], bool | np.bool_) for i in candidates.tolist())


def build_array(column: FeatureColumn, cells: list[object]) -> np.ndarray[Any, Any]:
    """Checked cells -> the dtype training used (see ensembles.data.to_model_frame)."""
    family = value_family(column)
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
