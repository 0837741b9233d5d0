"""Uploaded files (CSV, Parquet, JSON Lines) -> canonical tables (:mod:`ensembles.data`).

Rules chosen here, beyond the public contract:

* CSV is comma-separated UTF-8 (a BOM is fine). Exactly ``""``, ``NA``, ``NaN``, ``null``
  and ``None`` are missing (case-sensitive, surrounding blanks ignored). ``N/A``, ``n/a`` or
  ``-`` are ordinary values, so a category spelled that way survives as a string. Header
  names lose surrounding blanks; blank lines are skipped; a header whose cells are all
  numbers is refused ("looks like data"), and so is a one-cell header holding ``;``, tab or
  ``|`` (another delimiter). ``inf`` in a numeric CSV column is refused.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ensembles.data import (
    Format,
    Table,
    TableLimits,
    bool_series,
    check_limit,
    empty_series,
    finish_table,
    name_problems,
    number_series,
    problems_error,
    table_from_frame,
    table_from_records,
    text_series,
)
from ensembles.errors import DataError, Problem, TooLargeError, UnsupportedFormatError

_NA_TOKENS = frozenset({"", "NA", "NaN", "null", "None"})
_INT = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NON_FINITE = re.compile(r"[+-]?(?:inf|infinity)", re.IGNORECASE)
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


NO_LIMITS = TableLimits()

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
    if problems := name_problems(names):
        raise problems_error("invalid header", problems)
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
                check_limit("columns", len(header), limits.max_columns)
                continue
            check_limit("rows", len(rows) + 1, limits.max_rows)
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
        raise problems_error("ragged rows", problems)
    return header, rows


def _csv_column(name: str, cells: list[str]) -> pd.Series:
    """Infer int64, float64, bool, datetime or string from the text of one column."""
    tokens = [None if c.strip() in _NA_TOKENS else c for c in cells]
    present = [t.strip() for t in tokens if t is not None]
    if not present:
        return empty_series(len(cells))
    if all(_INT.fullmatch(t) for t in present):
        return number_series(name, [None if t is None else int(t) for t in tokens])
    if all(_NUMBER.fullmatch(t) or _NON_FINITE.fullmatch(t) for t in present):
        return number_series(name, [None if t is None else float(t) for t in tokens])
    if all(t.lower() in ("true", "false") for t in present):
        return bool_series([None if t is None else t.strip().lower() == "true" for t in tokens])
    return text_series(tokens)


def _read_csv(content: bytes, limits: TableLimits) -> Table:
    names, rows = _csv_rows(_decode(content, "a CSV table"), limits)
    return finish_table({n: _csv_column(n, [r[j] for r in rows]) for j, n in enumerate(names)})


def _read_jsonl(content: bytes, limits: TableLimits) -> Table:
    """One JSON object per line; split on "\\n" only, as JSON strings may hold U+2028."""
    records: list[object] = []
    for line_no, line in enumerate(_decode(content, "a JSON Lines table").split("\n"), start=1):
        if not line.strip():
            continue
        check_limit("rows", len(records) + 1, limits.max_rows)
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
        check_limit("columns", len(fields), limits.max_columns)
        check_limit("rows", parquet.metadata.num_rows, limits.max_rows)
        problems = name_problems([f.name for f in fields]) + [
            Problem(("columns", f.name), f"column {f.name!r} has unsupported type {f.type}")
            for f in fields
            if not _arrow_supported(f.type)
        ]
        if problems:
            raise problems_error("unsupported Parquet columns", problems)
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
    limits: TableLimits = NO_LIMITS,
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
