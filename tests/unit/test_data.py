"""Tables in -> canonical frames, training selection and the model frame."""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import OneHotEncoder

from ensembles.data import (
    ColumnSummary,
    Table,
    TableLimits,
    infer_task,
    read_table,
    select_training_data,
    table_from_frame,
    table_from_records,
    table_from_rows,
    table_to_parquet,
    to_model_frame,
)
from ensembles.errors import DataError, EnsembleError, TooLargeError, UnsupportedFormatError

UTC = dt.UTC


def csv(text: str | bytes) -> Table:
    content = text.encode() if isinstance(text, str) else text
    return read_table(content, filename="t.csv", content_type="text/csv")


def jsonl(*lines: object) -> Table:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    return read_table(text.encode(), filename="t.jsonl")


def parquet_bytes(arrow: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(arrow, sink)
    return sink.getvalue()


def parquet(arrow: pa.Table, limits: TableLimits | None = None) -> Table:
    return read_table(parquet_bytes(arrow), filename="t.parquet", limits=limits or TableLimits())


def is_float_nan(value: object) -> bool:
    """np.nan, not None or pd.NA: what scikit-learn's encoders treat as missing."""
    return isinstance(value, float) and np.isnan(value)


def fails(error: type[EnsembleError], call: Callable[..., object], *args: Any) -> EnsembleError:
    with pytest.raises(error) as info:
        call(*args)
    return info.value


def only(err: EnsembleError) -> tuple[tuple[str | int, ...], str]:
    assert len(err.problems) == 1, err.problems
    return err.problems[0].loc, err.problems[0].msg


def dtypes(table: Table) -> dict[str, str]:
    return {c.name: c.dtype for c in table.columns}


def pandas_dtypes(table: Table) -> dict[str, str]:
    return {str(k): str(v) for k, v in table.frame.dtypes.items()}


# ----------------------------------------------------------------------------- CSV


def test_csv_infers_each_dtype() -> None:
    table = csv(
        "i,f,b,d,s,im,bm,empty\n"
        "1,2.5,true,2024-01-01,x,7,TRUE,\n"
        "-2,1e3,False,2024-01-02T10:00:00+02:00,y,NA,,NA\n"
        "3,.5,FALSE,2024-01-03 09:30,x,9,false,\n"
    )
    assert dtypes(table) == {
        "i": "int64", "f": "float64", "b": "bool", "d": "datetime", "s": "string",
        "im": "float64", "bm": "bool", "empty": "float64",
    }  # fmt: skip
    assert pandas_dtypes(table) == {
        "i": "int64", "f": "float64", "b": "bool", "d": "datetime64[ns, UTC]", "s": "object",
        "im": "float64", "bm": "boolean", "empty": "float64",
    }  # fmt: skip
    frame = table.frame
    assert frame["i"].tolist() == [1, -2, 3]
    assert frame["f"].tolist() == [2.5, 1000.0, 0.5]
    assert frame["b"].tolist() == [True, False, False]
    assert frame["d"].tolist() == [
        pd.Timestamp("2024-01-01", tz=UTC),
        pd.Timestamp("2024-01-02 08:00", tz=UTC),
        pd.Timestamp("2024-01-03 09:30", tz=UTC),
    ]
    assert frame["s"].tolist() == ["x", "y", "x"]
    assert all(type(v) is str for v in frame["s"])
    assert frame["bm"].isna().tolist() == [False, True, False]
    assert table.columns[4] == ColumnSummary("s", "string", 0, 2)
    assert table.columns[5] == ColumnSummary("im", "float64", 1, 2)
    assert table.n_rows == 3 and table.n_columns == 8


def test_csv_missing_tokens_are_explicit_and_na_like_words_survive() -> None:
    table = csv("a,b\nN/A,1\nn/a,NA\nnull,NaN\nNone,\n-,2\n")
    assert table.frame["a"].tolist() == ["N/A", "n/a", None, None, "-"]
    assert table.columns[0] == ColumnSummary("a", "string", 2, 3)
    assert table.columns[1] == ColumnSummary("b", "float64", 3, 2)


def test_csv_quoting_bom_blank_lines_and_header_blanks() -> None:
    table = csv(b'\xef\xbb\xbf name , note\n"Smith, J","two\nlines"\n\nLee,plain\n')
    assert [c.name for c in table.columns] == ["name", "note"]
    assert table.frame["name"].tolist() == ["Smith, J", "Lee"]
    assert table.frame["note"].tolist() == ["two\nlines", "plain"]


def test_csv_text_that_only_looks_like_dates_or_numbers_stays_text() -> None:
    table = csv("d,n,huge\n2024-13-45,1,99999999999999999999\n2024-01-01,x,1\n")
    assert dtypes(table) == {"d": "string", "n": "string", "huge": "float64"}


CSV_BAD: dict[str, tuple[bytes, tuple[object, ...], str]] = {
    "empty": (b"", ("table",), "empty"),
    "blank": (b"  \n\n", ("table",), "empty"),
    "header-only": (b"a,b\n", ("table",), "no rows"),
    "numeric-header": (b"1,2.5\n3,4\n", ("header",), "looks like data, not a header"),
    "semicolons": (b"a;b;c\n1;2;3\n", ("header",), "only comma-separated files are read"),
    "unnamed": (b"a,,c\n1,2,3\n", ("columns", 1), "position 1 has no name"),
    "duplicate": (b"a,b,a\n1,2,3\n", ("columns", "a"), "positions 0 and 2"),
    "long-row": (b"a,b\n1,2\n3,4,5\n", ("rows", 1), "(line 3 of the file) has 3 fields"),
    "short-row": (b"a,b\n1\n", ("rows", 0), "has 1 fields; the header has 2"),
    "not-utf8": (b"a,b\n1,2\n3,\xff\n", ("bytes", 10), "byte 10 (line 3 of the file)"),
    "inf": (b"a,b\n1,2\n3,inf\n", ("rows", 1, "columns", "b"), "not a finite number"),
    "open-quote": (b'a\n1\n"x\n', ("rows", 1), "not valid CSV: unexpected end"),
    "junk-after-quote": (b'a\n"x"y\n', ("rows", 0), "(near line 2) is not valid CSV"),
}  # fmt: skip


@pytest.mark.parametrize(("content", "loc", "fragment"), CSV_BAD.values(), ids=CSV_BAD.keys())
def test_csv_bad_input(content: bytes, loc: tuple[object, ...], fragment: str) -> None:
    got_loc, msg = only(fails(DataError, csv, content))
    assert got_loc == loc
    assert fragment in msg


def test_csv_reports_every_ragged_row() -> None:
    err = fails(DataError, csv, "a,b\n1\n2,3\n4,5,6\n")
    assert [p.loc for p in err.problems] == [("rows", 0), ("rows", 2)]
    assert "2 problems" in err.detail


def test_iris_csv_round_trip() -> None:
    iris = load_iris(as_frame=True).frame
    table = csv(iris.to_csv(index=False))
    assert (table.n_rows, table.n_columns) == (150, 5)
    assert list(dtypes(table).values()) == ["float64"] * 4 + ["int64"]
    assert [c.n_unique for c in table.columns] == iris.nunique().tolist()
    assert table.columns[0].as_dict() == {
        "name": "sepal length (cm)", "dtype": "float64", "n_missing": 0, "n_unique": 35,
    }  # fmt: skip
    pd.testing.assert_frame_equal(table.frame, iris, check_names=False)


# ------------------------------------------------------------------------- Parquet


def test_parquet_maps_arrow_types_to_the_five_dtypes() -> None:
    arrow = pa.table(
        {
            "i8": pa.array([1, 2], pa.int8()),
            "u64": pa.array([3, 4], pa.uint64()),
            "i_null": pa.array([1, None], pa.int32()),
            "f32": pa.array([0.5, None], pa.float32()),
            "b": pa.array([True, False]),
            "b_null": pa.array([True, None]),
            "s": pa.array(["x", None]),
            "ls": pa.array(["x", "y"], pa.large_string()),
            "cat": pa.array(["u", "v"]).dictionary_encode(),
            "ts": pa.array([0, 1_000], pa.timestamp("ms", tz="Europe/Paris")),
            "naive": pa.array([0, 1], pa.timestamp("s")),
            "date": pa.array([dt.date(2024, 1, 1), None]),
            "none": pa.array([None, None]),
        }
    )
    table = parquet(arrow)
    assert dtypes(table) == {
        "i8": "int64", "u64": "int64", "i_null": "float64", "f32": "float64", "b": "bool",
        "b_null": "bool", "s": "string", "ls": "string", "cat": "string", "ts": "datetime",
        "naive": "datetime", "date": "datetime", "none": "float64",
    }  # fmt: skip
    assert pandas_dtypes(table)["b_null"] == "boolean"
    assert pandas_dtypes(table)["cat"] == "object"
    assert table.frame["s"].tolist() == ["x", None]
    assert table.frame["ts"].tolist()[1] == pd.Timestamp("1970-01-01 00:00:01", tz=UTC)
    assert table.frame["date"].iloc[0] == pd.Timestamp("2024-01-01", tz=UTC)


def test_parquet_refuses_nested_and_binary_columns() -> None:
    arrow = pa.table({"ok": [1], "tags": [["a", "b"]], "blob": pa.array([b"x"], pa.binary())})
    err = fails(DataError, parquet, arrow)
    assert [p.loc for p in err.problems] == [("columns", "tags"), ("columns", "blob")]
    assert "unsupported type list<" in err.problems[0].msg


def test_parquet_that_cannot_be_read() -> None:
    err = fails(DataError, lambda: read_table(b"PAR1 not parquet", filename="x.parquet"))
    loc, msg = only(err)
    assert loc == ("table",)
    assert "not a readable Parquet file" in msg


def test_parquet_written_by_pandas_drops_its_index() -> None:
    frame = pd.DataFrame({"a": [1, 2, 3], "s": ["x", "y", "z"]}).iloc[[0, 2]]
    sink = io.BytesIO()
    frame.to_parquet(sink)
    table = read_table(sink.getvalue(), filename="t.parquet")
    assert dtypes(table) == {"a": "int64", "s": "string"}
    assert table.frame["s"].tolist() == ["x", "z"]


def test_parquet_with_duplicate_names() -> None:
    arrow = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    assert only(fails(DataError, parquet, arrow))[0] == ("columns", "a")


def mixed_table() -> Table:
    return csv(
        "i,f,b,bm,s,d,naive\n"
        "1,2.5,true,true,x,2024-01-01T10:00:00+02:00,2024-05-01\n"
        "2,,false,,,2024-01-02,2024-05-02 12:00:00.123456789\n"
    )


def test_parquet_round_trip_is_exact_and_deterministic() -> None:
    table = mixed_table()
    content = table_to_parquet(table)
    again = read_table(content, filename="stored.parquet")
    pd.testing.assert_frame_equal(again.frame, table.frame)
    assert again.columns == table.columns
    assert table_to_parquet(again) == content == table_to_parquet(table)
    assert table.frame["naive"].iloc[1].nanosecond == 789
    loaded = table_from_frame(pd.read_parquet(io.BytesIO(content)))
    pd.testing.assert_frame_equal(loaded.frame, table.frame)
    assert loaded.columns == table.columns
    assert pq.read_schema(io.BytesIO(content)).metadata is None


def test_table_from_frame_is_idempotent() -> None:
    table = mixed_table()
    again = table_from_frame(table.frame)
    pd.testing.assert_frame_equal(again.frame, table.frame)
    assert again.columns == table.columns


def test_table_from_frame_converts_pandas_string_and_refuses_odd_types() -> None:
    table = table_from_frame(pd.DataFrame({"s": ["a", None], "n": pd.array([1, 2], "Int64")}))
    assert pandas_dtypes(table) == {"s": "object", "n": "int64"}
    err = fails(DataError, table_from_frame, pd.DataFrame({"t": pd.to_timedelta([1], "s")}))
    assert only(err)[0] == ("columns", "t")
    err = fails(DataError, table_from_frame, pd.DataFrame({"m": pd.Series([1, "a"], dtype=object)}))
    assert only(err)[0] == ("columns", "m")
    assert only(fails(DataError, table_from_frame, pd.DataFrame({"": [1]})))[0] == ("columns", 0)


# ------------------------------------------------------------------- JSON Lines


def test_jsonl_infers_each_dtype() -> None:
    table = jsonl(
        {"i": 1, "f": 1, "b": True, "s": "x", "d": "2024-01-01", "sb": "true"},
        "",
        {"i": 2, "f": 2.5, "b": None, "s": None, "d": "2024-01-02T00:00:00Z", "sb": "false"},
    )
    assert dtypes(table) == {
        "i": "int64", "f": "float64", "b": "bool", "s": "string", "d": "datetime",
        "sb": "string",
    }  # fmt: skip
    assert table.frame["f"].tolist() == [1.0, 2.5]
    assert table.frame["s"].tolist() == ["x", None]


def test_jsonl_keeps_line_separators_inside_strings() -> None:
    table = read_table('{"s": "a\u2028b"}\n'.encode(), filename="t.ndjson")
    assert table.frame["s"].tolist() == ["a\u2028b"]


JSONL_BAD: dict[str, tuple[list[str], tuple[object, ...], str]] = {
    "json": (['{"a": 1}', "", "{oops"], ("rows", 1), "(line 3 of the file) is not valid JSON"),
    "not-object": (['{"a": 1}', "[1]"], ("rows", 1), "is a list, not an object"),
    "nan": (['{"a": 1}', '{"a": NaN}'], ("rows", 1, "columns", "a"), "not a finite number"),
    "nested": (['{"a": [1, 2]}'], ("rows", 0, "columns", "a"), "not a table value"),
    "unnamed": (['{"": 1}'], ("columns", 0), "has no name"),
    "no-records": (["", " "], ("table",), "empty"),
}


@pytest.mark.parametrize(("lines", "loc", "fragment"), JSONL_BAD.values(), ids=JSONL_BAD.keys())
def test_jsonl_bad_input(lines: list[str], loc: tuple[object, ...], fragment: str) -> None:
    got_loc, msg = only(fails(DataError, jsonl, *lines))
    assert got_loc == loc
    assert fragment in msg


# ------------------------------------------------------------------ rows / records


def test_rows_infer_each_dtype() -> None:
    table = table_from_rows(
        ["i", "f", "b", "s", "d", "none"],
        [[1, 1, True, "x", "2024-01-01", None], [2, 0.5, False, "y", "2024-02-01", None]],
    )
    assert dtypes(table) == {
        "i": "int64", "f": "float64", "b": "bool", "s": "string", "d": "datetime",
        "none": "float64",
    }  # fmt: skip


ROWS_BAD: dict[str, tuple[list[object], list[object], tuple[object, ...], str]] = {
    "short": (["a", "b"], [[1, 2], [3]], ("rows", 1), "has 1 values; expected 2"),
    "not-array": (["a"], [[1], "x"], ("rows", 1), "not an array"),
    "name-type": ([1, "b"], [[1, 2]], ("columns", 0), "has no name"),
    "duplicate": (["a", "a"], [[1, 2]], ("columns", "a"), "positions 0 and 1"),
    "mixed": (["age"], [[1], [2.5], [None], ["x"]], ("rows", 3, "columns", "age"),
              "column 'age' has a number in row 0 and a string in row 3"),
    "bool-number": (["a"], [[True], [1]], ("rows", 1, "columns", "a"), "a boolean in row 0"),
    "inf": (["a"], [[1.0], [float("inf")]], ("rows", 1, "columns", "a"), "not a finite number"),
    "nan": (["a"], [[float("nan")]], ("rows", 0, "columns", "a"), "use null for a missing"),
    "no-rows": (["a"], [], ("table",), "no rows"),
}  # fmt: skip


@pytest.mark.parametrize(
    ("columns", "rows", "loc", "fragment"), ROWS_BAD.values(), ids=ROWS_BAD.keys()
)
def test_rows_bad_input(
    columns: list[object], rows: list[object], loc: tuple[object, ...], fragment: str
) -> None:
    got_loc, msg = only(fails(DataError, table_from_rows, columns, rows))
    assert got_loc == loc
    assert fragment in msg


def test_records_union_keys_in_first_seen_order() -> None:
    table = table_from_records([{"b": 1, "a": "x"}, {"a": "y", "c": True}, {}])
    assert [c.name for c in table.columns] == ["b", "a", "c"]
    assert dtypes(table) == {"b": "float64", "a": "string", "c": "bool"}
    assert table.columns[0] == ColumnSummary("b", "float64", 2, 1)
    assert table.frame["a"].tolist() == ["x", "y", None]
    assert pandas_dtypes(table) == {"b": "float64", "a": "object", "c": "boolean"}


def test_records_must_be_objects() -> None:
    err = fails(DataError, table_from_records, [{"a": 1}, [1], "x"])
    assert [p.loc for p in err.problems] == [("rows", 1), ("rows", 2)]
    assert "row 1 is a list, not an object" in err.problems[0].msg


# ----------------------------------------------------------------- format, limits


@pytest.mark.parametrize(
    ("filename", "content_type"),
    [
        pytest.param(None, "text/csv; charset=utf-8", id="csv-type"),
        pytest.param("t.CSV", None, id="csv-ext"),
        pytest.param("t.csv", "application/octet-stream", id="octet-ext"),
        pytest.param("t.csv", "application/vnd.ms-excel", id="unknown-type-ext"),
    ],
)
def test_csv_is_chosen_by_type_or_extension(filename: str | None, content_type: str | None) -> None:
    table = read_table(b"a\n1\n", filename=filename, content_type=content_type)
    assert dtypes(table) == {"a": "int64"}


@pytest.mark.parametrize(
    ("filename", "content_type"),
    [
        ("x.bin", "application/vnd.apache.parquet"),
        (None, "application/x-parquet"),
        (None, "application/parquet"),
        ("t.pq", None),
        ("upload", "application/octet-stream"),
        (None, None),
    ],
)
def test_parquet_is_chosen_by_type_extension_or_magic(
    filename: str | None, content_type: str | None
) -> None:
    content = parquet_bytes(pa.table({"a": [1]}))
    assert read_table(content, filename=filename, content_type=content_type).n_rows == 1


@pytest.mark.parametrize(
    "content_type", ["application/x-ndjson", "application/jsonl", "application/x-jsonlines"]
)
def test_jsonl_is_chosen_by_type(content_type: str) -> None:
    assert read_table(b'{"a": 1}\n', content_type=content_type).n_rows == 1


@pytest.mark.parametrize(
    ("filename", "content_type"),
    [("t.xlsx", None), ("t.txt", "text/plain"), (None, "application/json"), (None, None)],
)
def test_unknown_format(filename: str | None, content_type: str | None) -> None:
    call = lambda: read_table(b"a\n1\n", filename=filename, content_type=content_type)  # noqa: E731
    loc, msg = only(fails(UnsupportedFormatError, call))
    assert loc == ("file",)
    assert "CSV, Parquet or JSONL" in msg


LIMITS = TableLimits(max_bytes=100, max_rows=2, max_columns=2)
ROW_LIMITS = TableLimits(max_rows=2, max_columns=2)  # any Parquet file is over 100 bytes
TOO_LARGE: dict[str, tuple[Callable[[], object], tuple[object, ...], str]] = {
    "bytes": (lambda: csv_limited(b"a\n" + b"1\n" * 60), ("bytes",), "122 bytes; the limit is 100"),
    "csv-rows": (lambda: csv_limited(b"a\n1\n2\n3\n"), ("rows",), "more than 2 rows; the limit"),
    "csv-columns": (lambda: csv_limited(b"a,b,c\n1,2,3\n"), ("columns",), "more than 2 columns"),
    "jsonl-rows": (lambda: read_table(b"{}\n{}\n{}\n", filename="t.jsonl", limits=LIMITS),
                   ("rows",), "more than 2 rows"),
    "parquet-rows": (lambda: parquet(pa.table({"a": [1, 2, 3]}), ROW_LIMITS), ("rows",), "2 rows"),
    "parquet-columns": (lambda: parquet(pa.table({"a": [1], "b": [2], "c": [3]}), ROW_LIMITS),
                        ("columns",), "2 columns"),
    "rows-columns": (lambda: table_from_rows(["a", "b", "c"], [[1, 2, 3]], LIMITS),
                     ("columns",), "2 columns"),
    "records-rows": (lambda: table_from_records([{"a": 1}] * 3, LIMITS), ("rows",), "2 rows"),
    "records-columns": (lambda: table_from_records([{"a": 1, "b": 2, "c": 3}], LIMITS),
                        ("columns",), "2 columns"),
}  # fmt: skip


def csv_limited(content: bytes) -> Table:
    return read_table(content, filename="t.csv", limits=LIMITS)


@pytest.mark.parametrize(("call", "loc", "fragment"), TOO_LARGE.values(), ids=TOO_LARGE.keys())
def test_limits(call: Callable[[], object], loc: tuple[object, ...], fragment: str) -> None:
    got_loc, msg = only(fails(TooLargeError, call))
    assert got_loc == loc
    assert fragment in msg


def test_tables_at_the_limits_pass() -> None:
    assert csv_limited(b"a,b\n1,2\n3,4\n").n_rows == 2
    assert table_from_records([{"a": 1, "b": 2}] * 2, LIMITS).n_columns == 2


# ------------------------------------------------------------------------- training


def training_table() -> Table:
    return table_from_rows(
        ["x", "flag", "colour", "when", "label", "score", "level", "half"],
        [
            [1.0, True, "red", "2024-01-01", "a", 1.5, 1, 1.0],
            [2.0, False, None, "2024-01-02", "b", 2.5, 2, 2.0],
            [None, True, "blue", "2024-01-03", "a", 3.5, 1, 2.5],
            [4.0, None, "red", "2024-01-04", "b", 4.5, 3, 3.0],
        ],
    )


def test_select_training_data_classification_with_defaults() -> None:
    table = iris_table()
    data = select_training_data(table, "target")
    assert data.task == "classification" and data.task_inferred
    assert list(data.X.columns) == [c.name for c in table.columns[:4]]
    assert data.features == table.columns[:4]
    assert data.target == table.columns[4]
    assert data.y.dtype == np.int64
    assert data.classes == (0, 1, 2) and all(type(c) is int for c in data.classes)
    assert all(str(t) == "float64" for t in data.X.dtypes)


def test_select_training_data_string_labels_and_explicit_features() -> None:
    data = select_training_data(training_table(), "label", ["colour", "flag", "x"])
    assert list(data.X.columns) == ["colour", "flag", "x"]
    assert data.classes == ("a", "b")
    assert data.y.dtype == object and data.y.tolist() == ["a", "b", "a", "b"]
    assert [f.name for f in data.features] == ["colour", "flag", "x"]


def test_select_training_data_explicit_task_wins() -> None:
    data = select_training_data(training_table(), "level", ["x"], task="regression")
    assert data.task == "regression" and not data.task_inferred
    assert data.y.dtype == np.float64 and data.classes is None
    data = select_training_data(training_table(), "score", ["x"], task="regression")
    assert data.y.tolist() == [1.5, 2.5, 3.5, 4.5]
    assert select_training_data(training_table(), "level", ["x"]).task == "classification"


def test_float_target_classification_needs_whole_numbers() -> None:
    table = training_table()
    err = fails(DataError, select_training_data, table, "half", ["x"], "classification")
    assert only(err) == (("target",), "classes must be whole numbers; 'half' has 2.5 in row 2")
    whole = table_from_rows(["x", "y"], [[1, 1.0], [2, 2.0], [3, 1.0]])
    data = select_training_data(whole, "y", task="classification")
    assert data.y.dtype == np.int64 and data.classes == (1, 2)


def test_select_training_data_reports_every_problem_at_once() -> None:
    err = fails(
        DataError, select_training_data, training_table(), "nope", ["x", "ghost", "x", "when"]
    )
    assert [p.loc for p in err.problems] == [
        ("target",),
        ("features", 1),
        ("features", 2),
        ("features", 3),
    ]
    messages = [p.msg for p in err.problems]
    assert "no column 'nope'" in messages[0]
    assert "no column 'ghost'" in messages[1]
    assert "listed twice, at positions 0 and 2" in messages[2]
    assert "derive numeric columns" in messages[3]


def test_target_among_features_and_no_features() -> None:
    err = fails(DataError, select_training_data, training_table(), "label", ["x", "label"])
    assert only(err) == (("features", 1), "'label' is the target; it cannot also be a feature")
    lonely = table_from_rows(["y"], [["a"], ["b"]])
    assert only(fails(DataError, select_training_data, lonely, "y"))[0] == ("features",)


def test_missing_target_values_are_counted() -> None:
    values = [None if i in (3, 8, 11) or i > 20 else float(i % 2) for i in range(30)]
    table = table_from_rows(["x", "y"], [[i, v] for i, v in enumerate(values)])
    loc, msg = only(fails(DataError, select_training_data, table, "y"))
    assert loc == ("target",)
    assert msg == "12 rows have no value in target 'y' (first: rows 3, 8, 11)"


@pytest.mark.parametrize(
    ("target", "task", "fragment"),
    [
        pytest.param("colour", "regression", "regression needs a numeric target", id="string"),
        pytest.param("when", None, "datetime column", id="datetime"),
        pytest.param("flag", "regression", "is a bool column", id="bool"),
    ],
)
def test_target_unfit_for_task(target: str, task: Any, fragment: str) -> None:
    err = fails(DataError, select_training_data, training_table(), target, ["x"], task)
    assert fragment in err.problems[-1].msg
    assert all(p.loc == ("target",) for p in err.problems)


def test_classification_needs_two_classes() -> None:
    table = table_from_rows(["x", "y"], [[1, "a"], [2, "a"]])
    assert only(fails(DataError, select_training_data, table, "y")) == (
        ("target",),
        "classification needs at least 2 classes; 'y' has 1",
    )


def test_bool_target_labels() -> None:
    table = table_from_rows(["x", "y"], [[1, True], [2, False]])
    data = select_training_data(table, "y")
    assert data.y.dtype == np.bool_ and data.classes == (False, True)


@pytest.mark.parametrize(
    ("values", "dtype", "task"),
    [
        (["a", "b"], "string", "classification"),
        ([True, False], "bool", "classification"),
        ([0, 1, 2, 1], "int64", "classification"),
        (list(range(21)), "int64", "regression"),
        (list(range(20)), "int64", "classification"),
        ([0.0, 1.0, None], "float64", "classification"),
        ([0.0, 1.5], "float64", "regression"),
        ([float(i) for i in range(21)], "float64", "regression"),
    ],
)
def test_infer_task(values: list[object], dtype: Any, task: str) -> None:
    assert infer_task(pd.Series(values), dtype) == task


# ------------------------------------------------------------------------ model frame


def iris_table() -> Table:
    return csv(load_iris(as_frame=True).frame.to_csv(index=False))


def test_model_frame_keeps_complete_numeric_columns_untouched() -> None:
    table = table_from_rows(["i", "f"], [[1, 0.5], [2, 1.5]])
    frame = to_model_frame(table.frame, {"f": "float64", "i": "int64"})
    assert list(frame.columns) == ["f", "i"]
    assert frame["i"].dtype == np.int64 and frame["f"].dtype == np.float64
    np.testing.assert_array_equal(frame["i"].to_numpy(), [1, 2])


def test_model_frame_dtypes_for_canonical_frame() -> None:
    table = training_table()
    frame = to_model_frame(table.frame, {"x": "float64", "flag": "bool", "colour": "string"})
    assert [str(t) for t in frame.dtypes] == ["float64", "object", "object"]
    assert frame["flag"].iloc[:3].tolist() == [True, False, True]
    assert all(type(v) is bool for v in frame["flag"].iloc[:3])
    assert is_float_nan(frame["flag"].iloc[3])
    assert is_float_nan(frame["colour"].iloc[1])
    OneHotEncoder(handle_unknown="ignore").fit(frame[["flag", "colour"]])


def test_model_frame_accepts_frames_built_from_json() -> None:
    frame = pd.DataFrame({"i": [1, None], "s": ["a", None], "b": [True, None], "n": [3, 4]})
    model = to_model_frame(frame, {"i": "int64", "s": "string", "b": "bool", "n": "int64"})
    assert [str(t) for t in model.dtypes] == ["float64", "object", "object", "int64"]
    assert np.isnan(model["i"].iloc[1]) and is_float_nan(model["s"].iloc[1])
    objects = pd.DataFrame({"i": pd.Series([1, 2], dtype=object)})
    assert to_model_frame(objects, {"i": "int64"})["i"].dtype == np.int64


def test_model_frame_names_bad_cells() -> None:
    frame = pd.DataFrame(
        {"n": pd.Series([1, "x"], dtype=object), "s": [1, 2], "b": [True, True], "f": [1, np.inf]}
    )
    err = fails(
        DataError,
        to_model_frame,
        frame,
        {"n": "float64", "s": "string", "ghost": "int64", "b": "float64", "f": "float64"},
    )
    assert [p.loc for p in err.problems] == [
        ("rows", 1, "columns", "n"),
        ("rows", 0, "columns", "s"),
        ("columns", "ghost"),
        ("rows", 0, "columns", "b"),
        ("rows", 1, "columns", "f"),
    ]
    assert "expected a number, got str 'x'" in err.problems[0].msg
    assert "expected a string" in err.problems[1].msg
    assert "not a finite number" in err.problems[4].msg


def test_model_frame_refuses_datetime() -> None:
    table = training_table()
    err = fails(DataError, to_model_frame, table.frame, {"when": "datetime"})
    assert only(err)[0] == ("columns", "when")
