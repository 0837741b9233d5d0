"""Tables in (CSV, Parquet, JSON Lines, JSON rows/records) -> validated, typed frames.

Every table becomes one *canonical* frame whose columns have one of five dtypes, so that
storage, summaries and model input never depend on how the table arrived:

* ``int64``: numpy int64 (an integer column with missing values is float64 instead);
* ``float64``: numpy float64, NaN for missing, never +-inf;
* ``bool``: numpy bool, or pandas ``"boolean"`` when values are missing;
* ``string``: ``object`` dtype of Python ``str``, ``None`` for missing (not pandas 3's
  inferred ``str`` dtype, which Parquet, scikit-learn and equality checks treat differently);
* ``datetime``: ``datetime64[ns, UTC]``; naive values are taken as UTC.

Rules chosen here, beyond the public contract:

* A column without any value is float64 (all NaN), whatever its source type.
* CSV is comma-separated UTF-8 (a BOM is fine). Exactly ``""``, ``NA``, ``NaN``, ``null``
  and ``None`` are missing (case-sensitive, surrounding blanks ignored). ``N/A``, ``n/a`` or
  ``-`` are ordinary values, so a category spelled that way survives as a string. Header
  names lose surrounding blanks; blank lines are skipped; a header whose cells are all
  numbers is refused ("looks like data"), and so is a one-cell header holding ``;``, tab or
  ``|`` (another delimiter). ``inf`` in a numeric CSV column is refused.
* Integers beyond the int64 range make the column float64, as in pandas.
* A read stops at the first kind of problem and lists up to ``MAX_PROBLEMS`` places.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ensembles.errors import DataError, Problem, TooLargeError, UnsupportedFormatError, shown
from ensembles.suggestions import did_you_mean, hint
from ensembles.tasks import Task

ColumnDtype = Literal["int64", "float64", "bool", "string", "datetime"]
Format = Literal["csv", "parquet", "jsonl"]

MAX_PROBLEMS = 20
MAX_CLASSIFICATION_LEVELS = 20
_INT64_MAX = np.iinfo(np.int64).max
_NA_TOKENS = frozenset({"", "NA", "NaN", "null", "None"})
_INT = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NON_FINITE = re.compile(r"[+-]?(?:inf|infinity)", re.IGNORECASE)
_ISO_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
)
_CONTENT_TYPES: dict[str, Format] = {
    **dict.fromkeys(("text/csv", "application/csv"), "csv"),
    **dict.fromkeys(("application/vnd.apache.parquet", "application/x-parquet"), "parquet"),
    **dict.fromkeys(("application/parquet",), "parquet"),
    **dict.fromkeys(("application/x-ndjson", "application/ndjson"), "jsonl"),
    **dict.fromkeys(("application/jsonl", "application/x-jsonlines"), "jsonl"),
}
_EXTENSIONS: dict[str, Format] = {
    **{".csv": "csv", ".parquet": "parquet", ".pq": "parquet"},
    **{".jsonl": "jsonl", ".ndjson": "jsonl"},
}


@dataclass(frozen=True)
class ColumnSummary:
    """What the API reports per column; ``n_unique`` counts distinct non-missing values."""

    name: str
    dtype: ColumnDtype
    n_missing: int
    n_unique: int

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "dtype": self.dtype, "n_missing": self.n_missing,
                "n_unique": self.n_unique}  # fmt: skip


@dataclass(frozen=True, eq=False)  # eq=False: `frame == frame` has no single truth value
class Table:
    """A canonical frame (see the module docstring) and its column summaries, in order."""

    frame: pd.DataFrame
    columns: tuple[ColumnSummary, ...]

    @property
    def n_rows(self) -> int:
        return len(self.frame)

    @property
    def n_columns(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class TableLimits:
    """Upper bounds on one table; ``None`` means unbounded."""

    max_bytes: int | None = None
    max_rows: int | None = None
    max_columns: int | None = None


@dataclass(frozen=True, eq=False)
class TrainingData:
    """Features and labels ready for scikit-learn, plus what was decided on the way."""

    X: pd.DataFrame
    y: np.ndarray[Any, Any]
    task: Task
    features: tuple[ColumnSummary, ...]
    target: ColumnSummary
    classes: tuple[object, ...] | None
    task_inferred: bool


# ---------------------------------------------------------------- errors and checks


def _fail(detail: str, problems: Sequence[Problem]) -> DataError:
    """One error listing at most MAX_PROBLEMS places, so a badly broken file stays readable."""
    count = f"{len(problems)} problem" + ("s" if len(problems) > 1 else "")
    more = f", the first {MAX_PROBLEMS} listed" if len(problems) > MAX_PROBLEMS else ""
    return DataError(f"{detail}: {count}{more}", problems[:MAX_PROBLEMS])


def _cell(row: int, name: str, msg: str) -> DataError:
    problem = Problem(("rows", row, "columns", name), msg)
    return DataError(f"invalid value in column {name!r}", [problem])


def _check_limit(what: Literal["rows", "columns"], count: int, limit: int | None) -> None:
    if limit is not None and count > limit:
        problem = Problem((what,), f"more than {limit} {what}; the limit is {limit}")
        raise TooLargeError(f"the table has too many {what}", [problem])


def _is_missing(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def _name_problems(names: Sequence[object]) -> list[Problem]:
    """Names must be non-empty strings and unique; a duplicate names both positions."""
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name.strip():
            msg = f"the column at position {i} has no name; names are non-empty strings"
            problems.append(Problem(("columns", i), msg))
        elif name in first:
            msg = f"column {name!r} appears twice, at positions {first[name]} and {i}"
            problems.append(Problem(("columns", name), msg))
        else:
            first[name] = i
    return problems


# ---------------------------------------------------------------- canonical columns


def _empty_series(n: int) -> pd.Series:
    return pd.Series(np.full(n, np.nan), dtype="float64")


def _floats(name: str, floats: np.ndarray[Any, Any]) -> pd.Series:
    bad = np.flatnonzero(np.isinf(floats))
    if bad.size:
        raise _cell(int(bad[0]), name, f"{floats[bad[0]]} is not a finite number")
    return pd.Series(floats, dtype="float64")


def _number_series(name: str, values: Sequence[int | float | None]) -> pd.Series:
    """int64 when every value is an in-range integer, else float64 with NaN for missing."""
    if all(isinstance(v, int) for v in values):
        try:
            return pd.Series(np.array(values, dtype="int64"))
        except OverflowError:
            pass
    try:
        floats = np.array([np.nan if v is None else float(v) for v in values], dtype="float64")
    except OverflowError as exc:
        msg = f"column {name!r} has a number too large for a float"
        raise DataError("number out of range", [Problem(("columns", name), msg)]) from exc
    return _floats(name, floats)


def _bool_series(values: Sequence[bool | None]) -> pd.Series:
    if any(v is None for v in values):
        return pd.Series(pd.array(list(values), dtype="boolean"))
    return pd.Series(np.array(values, dtype="bool"))


def _text_series(values: Sequence[str | None], sniff_dates: bool = True) -> pd.Series:
    """Datetimes when every value is an ISO-8601 date or datetime, else strings."""
    stripped = [None if v is None else v.strip() for v in values]
    if sniff_dates and all(v is None or _ISO_DATE.fullmatch(v) for v in stripped):
        try:
            parsed = pd.to_datetime(pd.Series(stripped, dtype=object), format="ISO8601", utc=True)
            return cast(pd.Series, parsed.dt.as_unit("ns"))
        except (ValueError, OverflowError):  # 2024-13-40 or year 3000: keep the text
            pass
    return pd.Series(list(values), dtype=object)


def _dtype_of(series: pd.Series) -> ColumnDtype:
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        return "datetime"
    if series.dtype == np.dtype(object):
        return "string"
    names: dict[str, ColumnDtype] = {"int64": "int64", "float64": "float64", "bool": "bool"}
    return names.get(str(series.dtype), "bool")  # the rest is pandas "boolean"


def _finish(columns: Mapping[str, pd.Series]) -> Table:
    """Assemble the canonical frame and its summaries; a table without rows is refused."""
    if not columns:
        raise DataError("empty table", [Problem(("table",), "the table has no columns")])
    frame = pd.DataFrame({name: s.reset_index(drop=True) for name, s in columns.items()})
    if len(frame) == 0:
        raise DataError("empty table", [Problem(("table",), "the table has no rows")])
    summaries = tuple(
        ColumnSummary(str(name), _dtype_of(s), int(s.isna().sum()), int(s.nunique(dropna=True)))
        for name, s in frame.items()
    )
    return Table(frame, summaries)


# --------------------------------------------------------------------------- frames


def _objects_column(name: str, s: pd.Series) -> pd.Series:
    """Strings (object, str, categorical) keep their type: no date sniffing here."""
    values = [None if _is_missing(v) else v for v in s.to_numpy(dtype=object)]
    if all(isinstance(v, str | None) for v in values):
        return _text_series(cast(list[str | None], values), sniff_dates=False)
    if all(isinstance(v, bool | np.bool_ | None) for v in values):
        return _bool_series([None if v is None else bool(v) for v in values])
    msg = f"column {name!r} mixes value types; use one type per column"
    raise DataError("mixed value types", [Problem(("columns", name), msg)])


def _frame_column(name: str, s: pd.Series) -> pd.Series:
    """Map one column of any pandas dtype onto the five canonical dtypes."""
    dtype, missing = s.dtype, bool(s.isna().any())
    if bool(s.isna().all()):
        return _empty_series(len(s))
    if isinstance(dtype, pd.CategoricalDtype | pd.StringDtype) or dtype == np.dtype(object):
        return _objects_column(name, s)
    if pd.api.types.is_bool_dtype(dtype):
        return s.astype("boolean") if missing else s.astype("bool")
    if pd.api.types.is_integer_dtype(dtype) and not missing:
        ints = s.to_numpy()
        if ints.dtype == np.uint64 and ints.max() > _INT64_MAX:
            return _floats(name, ints.astype("float64"))
        return pd.Series(ints.astype("int64"))
    if pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_float_dtype(dtype):
        return _floats(name, s.to_numpy(dtype="float64", na_value=np.nan))
    if pd.api.types.is_datetime64_any_dtype(dtype):
        utc = s.dt.tz_convert("UTC") if s.dt.tz is not None else s.dt.tz_localize("UTC")
        try:
            return cast(pd.Series, utc.dt.as_unit("ns"))
        except ValueError as exc:
            raise DataError("date out of range", [Problem(("columns", name), str(exc))]) from exc
    msg = f"column {name!r} has type {dtype}; use numbers, booleans, strings or timestamps"
    raise DataError("unsupported column type", [Problem(("columns", name), msg)])


def table_from_frame(frame: pd.DataFrame) -> Table:
    """Canonicalise a built frame; idempotent, so a stored canonical table loads back equal."""
    if problems := _name_problems(list(frame.columns)):
        raise _fail("invalid column names", problems)
    return _finish({str(n): _frame_column(str(n), s) for n, s in frame.items()})


# ---------------------------------------------------------------------- JSON values

_KIND_WORDS = {"number": "a number", "bool": "a boolean", "string": "a string"}


def _json_kind(row: int, name: str, value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float) and not math.isfinite(value):
        raise _cell(row, name, f"{value} is not a finite number; use null for a missing value")
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    raise _cell(row, name, f"a {type(value).__name__} is not a table value; use a scalar")


def _json_column(name: str, values: Sequence[object]) -> pd.Series:
    """One typed column of JSON scalars; mixing kinds (except int with float) is refused."""
    first: dict[str, int] = {}
    for row, value in enumerate(values):
        if (kind := _json_kind(row, name, value)) is not None:
            first.setdefault(kind, row)
    if len(first) > 1:
        (a, row_a), (b, row_b) = list(first.items())[:2]
        words = f"{_KIND_WORDS[a]} in row {row_a} and {_KIND_WORDS[b]} in row {row_b}"
        msg = f"column {name!r} has {words}"
        raise DataError("mixed value types", [Problem(("rows", row_b, "columns", name), msg)])
    builders: dict[str, Callable[[Any], pd.Series]] = {
        "number": lambda v: _number_series(name, v), "bool": _bool_series, "string": _text_series,
    }  # fmt: skip
    kind = next(iter(first), None)
    return builders[kind](values) if kind else _empty_series(len(values))


def _json_table(names: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    return _finish({n: _json_column(n, [r[j] for r in rows]) for j, n in enumerate(names)})


def table_from_rows(
    columns: Sequence[object], rows: Sequence[object], limits: TableLimits = TableLimits()
) -> Table:
    """``{"columns": [...], "rows": [[...], ...]}``: every row has one value per column."""
    _check_limit("columns", len(columns), limits.max_columns)
    _check_limit("rows", len(rows), limits.max_rows)
    problems = _name_problems(columns)
    for i, row in enumerate(rows):
        if not isinstance(row, list | tuple):
            problems.append(Problem(("rows", i), f"row {i} is not an array of values"))
        elif len(row) != len(columns):
            msg = f"row {i} has {len(row)} values; expected {len(columns)}, one per column"
            problems.append(Problem(("rows", i), msg))
    if problems:
        raise _fail("invalid table", problems)
    return _json_table(cast(list[str], columns), cast(list[list[object]], rows))


def table_from_records(records: Sequence[object], limits: TableLimits = TableLimits()) -> Table:
    """``[{"a": 1}, ...]``: columns are the union of keys in first-seen order; absent = missing."""
    _check_limit("rows", len(records), limits.max_rows)
    dicts = [r for r in records if isinstance(r, dict)]
    if len(dicts) < len(records):
        problems = [
            Problem(("rows", i), f"row {i} is a {type(r).__name__}, not an object")
            for i, r in enumerate(records)
            if not isinstance(r, dict)
        ]
        raise _fail("invalid records", problems)
    names = list(dict.fromkeys(key for record in dicts for key in record))
    _check_limit("columns", len(names), limits.max_columns)
    if problems := _name_problems(names):
        raise _fail("invalid column names", problems)
    return _json_table(names, [[record.get(n) for n in names] for record in dicts])


# ---------------------------------------------------------------------------- files


_BINARY_MAGIC = {
    b"\x1f\x8b": "a gzip archive",
    b"PK\x03\x04": "a zip archive (an .xlsx workbook is one: export it as CSV)",
    b"\x89PNG": "a PNG image",
    b"%PDF": "a PDF document",
    b"\x7fELF": "an executable",
    b"\xd0\xcf\x11\xe0": "an Office document (export it as CSV)",
    b"PAR1": "a Parquet file (name it .parquet)",
}


def _decode(content: bytes, what: str) -> str:
    """UTF-8 text (a BOM is fine), else a refusal saying the file is not a ``what`` at all.

    A binary file would otherwise reach the parser: NUL bytes are valid UTF-8, so a file
    of zeros read as a one-column table "with no rows". NUL never occurs in a text table."""
    kind = next((k for magic, k in _BINARY_MAGIC.items() if content.startswith(magic)), None)
    nul = content.find(b"\x00")
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        advice = f"the file is {kind}" if kind else "if it is text, save it as UTF-8"
        msg = f"not {what}: byte {exc.start} (line {line} of the file) is not valid UTF-8; {advice}"
        raise DataError(f"not {what}", [Problem(("bytes", exc.start), msg)]) from exc
    if nul != -1:  # a text table never holds one; the magic number, if any, says what it is
        found = kind or f"binary data (a NUL byte at byte {nul})"
        msg = f"not {what}: the file is {found}; send {what} as UTF-8 text"
        raise DataError(f"not {what}", [Problem(("bytes", nul), msg)])
    return text


def _csv_header(cells: list[str]) -> list[str]:
    names = [c.strip() for c in cells]
    filled = [n for n in names if n]
    if filled and all(_NUMBER.fullmatch(n) for n in filled):
        msg = f"first row looks like data, not a header: {','.join(cells)[:80]!r}"
        raise DataError("no header row", [Problem(("header",), msg)])
    if len(names) == 1 and any(sep in names[0] for sep in ";\t|"):
        msg = f"the header is one column {names[0][:80]!r}; only comma-separated files are read"
        raise DataError("not comma-separated", [Problem(("header",), msg)])
    if problems := _name_problems(names):
        raise _fail("invalid header", problems)
    return names


def _csv_rows(text: str, limits: TableLimits) -> tuple[list[str], list[list[str]]]:
    """Header and data rows (blank lines skipped); ragged rows are reported by row and line."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)  # refuse bad quotes
    header: list[str] | None = None
    rows: list[list[str]] = []
    problems: list[Problem] = []
    try:
        for cells in reader:
            if not cells:
                continue
            if header is None:
                header = _csv_header(cells)
                _check_limit("columns", len(header), limits.max_columns)
                continue
            _check_limit("rows", len(rows) + 1, limits.max_rows)
            if len(cells) != len(header):
                msg = (f"row {len(rows)} (line {reader.line_num} of the file) has {len(cells)} "
                       f"fields; the header has {len(header)}")  # fmt: skip
                problems.append(Problem(("rows", len(rows)), msg))
            rows.append(cells)
    except csv.Error as exc:
        msg = f"row {len(rows)} (near line {reader.line_num}) is not valid CSV: {exc}"
        raise DataError("malformed CSV", [Problem(("rows", len(rows)), msg)]) from exc
    if header is None:
        raise DataError("empty file", [Problem(("table",), "the file is empty")])
    if problems:
        raise _fail("ragged rows", problems)
    return header, rows


def _csv_column(name: str, cells: list[str]) -> pd.Series:
    """Infer int64, float64, bool, datetime or string from the text of one column."""
    tokens = [None if c.strip() in _NA_TOKENS else c for c in cells]
    present = [t.strip() for t in tokens if t is not None]
    if not present:
        return _empty_series(len(cells))
    if all(_INT.fullmatch(t) for t in present):
        return _number_series(name, [None if t is None else int(t) for t in tokens])
    if all(_NUMBER.fullmatch(t) or _NON_FINITE.fullmatch(t) for t in present):
        return _number_series(name, [None if t is None else float(t) for t in tokens])
    if all(t.lower() in ("true", "false") for t in present):
        return _bool_series([None if t is None else t.strip().lower() == "true" for t in tokens])
    return _text_series(tokens)


def _read_csv(content: bytes, limits: TableLimits) -> Table:
    names, rows = _csv_rows(_decode(content, "a CSV table"), limits)
    return _finish({n: _csv_column(n, [r[j] for r in rows]) for j, n in enumerate(names)})


def _read_jsonl(content: bytes, limits: TableLimits) -> Table:
    """One JSON object per line; split on "\\n" only, as JSON strings may hold U+2028."""
    records: list[object] = []
    for line_no, line in enumerate(_decode(content, "a JSON Lines table").split("\n"), start=1):
        if not line.strip():
            continue
        _check_limit("rows", len(records) + 1, limits.max_rows)
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            msg = f"row {len(records)} (line {line_no} of the file) is not valid JSON: {exc.msg}"
            raise DataError("invalid JSON", [Problem(("rows", len(records)), msg)]) from exc
    return table_from_records(records, limits)


def _arrow_supported(dtype: Any) -> bool:
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    checks: list[Callable[[Any], bool]] = [
        pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean, pa.types.is_string,
        pa.types.is_large_string, pa.types.is_string_view, pa.types.is_timestamp,
        pa.types.is_date, pa.types.is_null,
    ]  # fmt: skip
    return any(check(dtype) for check in checks)


def _read_parquet(content: bytes, limits: TableLimits) -> Table:
    """Columns are checked against the five dtypes before any data is decoded. A pandas
    index stored as columns (``df.to_parquet()`` of a filtered frame) is not table data."""
    try:
        parquet = pq.ParquetFile(io.BytesIO(content))
        index = (parquet.schema_arrow.pandas_metadata or {}).get("index_columns", [])
        fields = [f for f in parquet.schema_arrow if f.name not in index]
        _check_limit("columns", len(fields), limits.max_columns)
        _check_limit("rows", parquet.metadata.num_rows, limits.max_rows)
        problems = _name_problems([f.name for f in fields]) + [
            Problem(("columns", f.name), f"column {f.name!r} has unsupported type {f.type}")
            for f in fields
            if not _arrow_supported(f.type)
        ]
        if problems:
            raise _fail("unsupported Parquet columns", problems)
        arrow = parquet.read(columns=[f.name for f in fields])
        frame = arrow.to_pandas(ignore_metadata=True, date_as_object=False)
    except (pa.ArrowException, OSError, ValueError) as exc:
        msg = f"not a readable Parquet file: {exc}"
        raise DataError("unreadable Parquet", [Problem(("table",), msg)]) from exc
    return table_from_frame(frame)


def _detect_format(content: bytes, filename: str | None, content_type: str | None) -> Format:
    """Content type first; else the file extension; else the Parquet magic bytes."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media in _CONTENT_TYPES:
        return _CONTENT_TYPES[media]
    suffix = "." + filename.rsplit(".", 1)[-1].lower() if filename and "." in filename else ""
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    if media in ("", "application/octet-stream") and content[:4] == b"PAR1":
        return "parquet"
    msg = f"cannot read {media or 'untyped'} file {filename or ''!r}: send CSV, Parquet or JSONL"
    raise UnsupportedFormatError("unsupported table format", [Problem(("file",), msg)])


def read_table(
    content: bytes,
    *,
    filename: str | None = None,
    content_type: str | None = None,
    limits: TableLimits = TableLimits(),
) -> Table:
    """Read an uploaded CSV (with a header row), Parquet or JSON Lines file."""
    if limits.max_bytes is not None and len(content) > limits.max_bytes:
        problem = Problem(("bytes",), f"{len(content)} bytes; the limit is {limits.max_bytes}")
        raise TooLargeError("the file is too large", [problem])
    fmt = _detect_format(content, filename, content_type)
    if not content.strip():
        raise DataError("empty file", [Problem(("table",), "the file is empty")])
    readers = {"csv": _read_csv, "parquet": _read_parquet, "jsonl": _read_jsonl}
    return readers[fmt](content, limits)


def table_to_parquet(table: Table) -> bytes:
    """Deterministic bytes: no index, no pandas metadata, fixed codec, so the sha256 is stable."""
    arrow = pa.Table.from_pandas(table.frame, preserve_index=False).replace_schema_metadata(None)
    sink = io.BytesIO()
    pq.write_table(arrow, sink, compression="zstd", compression_level=3)
    return sink.getvalue()


# ------------------------------------------------------------------------- training


def infer_task(target: pd.Series, dtype: ColumnDtype) -> Task:
    """Labels are strings, booleans, or whole numbers with few distinct values."""
    if dtype in ("string", "bool"):
        return "classification"
    if dtype == "datetime":
        msg = "a datetime column cannot be a target; derive a numeric column from it"
        raise DataError("unusable target", [Problem(("target",), msg)])
    values = target.dropna().to_numpy(dtype="float64")
    few = len(np.unique(values)) <= MAX_CLASSIFICATION_LEVELS
    integral = dtype == "int64" or bool(np.all(np.mod(values, 1) == 0))
    return "classification" if few and integral else "regression"


def _target_problems(name: str, dtype: ColumnDtype, values: pd.Series, task: Task) -> list[str]:
    """Why the non-missing target values do not fit the task (empty when they do)."""
    if task == "regression":
        if dtype not in ("int64", "float64"):
            return [f"regression needs a numeric target; {name!r} is a {dtype} column"]
        if not np.isfinite(values.to_numpy("float64")).all():
            return [f"target {name!r} has non-finite values"]
        return []
    if dtype == "float64":
        fractional = np.flatnonzero(np.mod(values.to_numpy("float64"), 1) != 0)
        if fractional.size:
            row, value = values.index[fractional[0]], values.iloc[fractional[0]]
            return [f"classes must be whole numbers; {name!r} has {value} in row {row}"]
    if values.nunique() < 2:
        return [f"classification needs at least 2 classes; {name!r} has {values.nunique()}"]
    return []


def _check_target(table: Table, target: str, task: Task | None) -> tuple[list[Problem], Task]:
    summary = next((c for c in table.columns if c.name == target), None)
    if summary is None:
        names = [c.name for c in table.columns]
        msg = f"no column {target!r} in the table{hint('columns', target, names)}"
        return [Problem(("target",), msg)], task or "regression"
    if summary.dtype == "datetime":
        msg = f"{target!r} is a datetime column; derive a numeric target from it"
        return [Problem(("target",), msg)], task or "regression"
    series = table.frame[target]
    messages: list[str] = []
    if (missing := np.flatnonzero(series.isna().to_numpy())).size:
        count = f"{missing.size} rows have" if missing.size > 1 else "1 row has"
        first = ", ".join(str(r) for r in missing[:3])
        messages.append(f"{count} no value in target {target!r} (first: rows {first})")
    resolved = task or infer_task(series, summary.dtype)
    messages += _target_problems(target, summary.dtype, series.dropna(), resolved)
    return [Problem(("target",), m) for m in messages], resolved


def _check_features(table: Table, target: str, features: Sequence[str]) -> list[Problem]:
    dtypes = {c.name: c.dtype for c in table.columns}
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, name in enumerate(features):
        if name not in dtypes:
            msg = f"no column {name!r} in the table{hint('columns', name, dtypes)}"
        elif name == target:
            msg = f"{name!r} is the target; it cannot also be a feature"
        elif name in seen:
            msg = f"{name!r} is listed twice, at positions {seen[name]} and {i}"
        elif dtypes[name] == "datetime":
            msg = f"{name!r} is a datetime column; derive numeric columns from it instead"
        else:
            msg = ""
        seen.setdefault(name, i)
        if msg:
            problems.append(Problem(("features", i), msg))
    if not features:
        problems.append(Problem(("features",), "there are no feature columns to train on"))
    return problems


def _labels(series: pd.Series, dtype: ColumnDtype, task: Task) -> np.ndarray[Any, Any]:
    if task == "regression":
        return series.to_numpy(dtype="float64")
    numpy_dtype = {"int64": "int64", "float64": "int64", "bool": "bool"}.get(dtype, "object")
    return series.to_numpy(dtype=numpy_dtype)


def select_training_data(
    table: Table, target: str, features: Sequence[str] | None = None, task: Task | None = None
) -> TrainingData:
    """Check target and features together, reporting every problem in one DataError."""
    summaries = {c.name: c for c in table.columns}
    # By default every column but the target, less datetime columns (models cannot take them).
    default = [c for c, s in summaries.items() if c != target and s.dtype != "datetime"]
    chosen = default if features is None else list(features)
    target_problems, resolved = _check_target(table, target, task)
    problems = target_problems + _check_features(table, target, chosen)
    if problems:
        raise _fail(f"the table cannot train a model of target {target!r}", problems)
    y = _labels(table.frame[target], summaries[target].dtype, resolved)
    classes = None
    if resolved == "classification":
        classes = tuple(v.item() if isinstance(v, np.generic) else v for v in np.unique(y))
    return TrainingData(
        X=to_model_frame(table.frame, {f: summaries[f].dtype for f in chosen}),
        y=y,
        task=resolved,
        features=tuple(summaries[f] for f in chosen),
        target=summaries[target],
        classes=classes,
        task_inferred=task is None,
    )


# ---------------------------------------------------------------------- model frame


def _wrong_type(row: int, name: str, expected: str, value: object) -> DataError:
    return _cell(row, name, f"expected {expected}, got {type(value).__name__} {shown(value)}")


def _model_numbers(name: str, s: pd.Series, dtype: ColumnDtype) -> np.ndarray[Any, Any]:
    """Complete int64 columns pass untouched (fidelity with plain scikit-learn); the rest
    become float64 with NaN for missing."""
    if pd.api.types.is_integer_dtype(s.dtype) and not bool(s.isna().any()):
        return s.to_numpy(dtype=dtype)
    if pd.api.types.is_float_dtype(s.dtype) or pd.api.types.is_integer_dtype(s.dtype):
        return _floats(name, s.to_numpy(dtype="float64", na_value=np.nan)).to_numpy()
    out: list[float] = []
    for row, value in enumerate(s.to_numpy(dtype=object)):
        if _is_missing(value):
            out.append(math.nan)
        elif isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
            raise _wrong_type(row, name, "a number", value)
        else:
            out.append(float(value))
    if dtype == "int64" and not any(map(math.isnan, out)) and all(v.is_integer() for v in out):
        return np.array(out, dtype="int64")
    return _floats(name, np.array(out, dtype="float64")).to_numpy()


def _model_objects(name: str, s: pd.Series, dtype: ColumnDtype) -> np.ndarray[Any, Any]:
    """Python bools or strs in an object array, np.nan for missing: OneHotEncoder's NaN."""
    expected: tuple[type, ...] = (bool, np.bool_) if dtype == "bool" else (str,)
    out: list[object] = []
    for row, value in enumerate(s.to_numpy(dtype=object)):
        if _is_missing(value):
            out.append(np.nan)
        elif isinstance(value, expected):
            out.append(bool(value) if dtype == "bool" else value)
        else:
            raise _wrong_type(row, name, "a boolean" if dtype == "bool" else "a string", value)
    return np.array(out, dtype=object)


def _model_column(name: str, frame: pd.DataFrame, dtype: ColumnDtype) -> np.ndarray[Any, Any]:
    if name not in frame.columns:
        sent = [c for c in frame.columns if isinstance(c, str)]
        msg = f"the column is missing{did_you_mean(name, sent)}"
        raise DataError("missing column", [Problem(("columns", name), msg)])
    if dtype == "datetime":
        msg = f"{name!r} is a datetime column; models take numbers, booleans or strings"
        raise DataError("datetime column", [Problem(("columns", name), msg)])
    if dtype in ("int64", "float64"):
        return _model_numbers(name, frame[name], dtype)
    return _model_objects(name, frame[name], dtype)


def to_model_frame(frame: pd.DataFrame, dtypes: Mapping[str, ColumnDtype]) -> pd.DataFrame:
    """The frame handed to scikit-learn, columns in ``dtypes`` order. Prediction reuses it on
    frames built from JSON, so every value is type-checked and bad cells are named."""
    columns: dict[str, pd.Series] = {}
    problems: list[Problem] = []
    for name, dtype in dtypes.items():
        try:
            array = _model_column(name, frame, dtype)
        except DataError as exc:
            problems += exc.problems
            continue
        columns[name] = pd.Series(array, index=frame.index, dtype=array.dtype)
    if problems:
        raise _fail("values unfit for the model", problems)
    return pd.DataFrame(columns, index=frame.index)
