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
    "beyond_float32",
    "build_array",
    "cannot_be_missing",
    "check_row_count",
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
ABSENT = object()  # a record without the column's key
SKIP = object()  # a row already refused as a whole: its cells are not checked
Columns = dict[str, np.ndarray[Any, Any]]
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
