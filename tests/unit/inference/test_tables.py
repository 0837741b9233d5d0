"""Arrow tables -> checked numpy columns: the arrays and the problems of the same rows as
JSON values (``check_rows``), numbers read without a copy where Arrow allows it."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from ensembles.builders import FeatureColumn
from ensembles.errors import PredictionInputError, TooLargeError
from ensembles.inference import (
    MAX_PROBLEMS,
    batches,
    cells,
    check_rows,
    check_table,
    servable,
    small_tables,
)
from ensembles.signature import ModelSignature

NUMBERS = ModelSignature(
    "classification",
    "random_forest",
    (FeatureColumn("a", "float64", False), FeatureColumn("b", "float64", False)),
    ("no", "yes"),
    "soft",
)
MIXED = ModelSignature(
    "classification",
    "random_forest",
    (
        FeatureColumn("n", "int64", False),
        FeatureColumn("x", "float64", True),  # had missing values: null is fine
        FeatureColumn("flag", "bool", False),
        FeatureColumn("city", "string", True),
    ),
    ("no", "yes"),
    "soft",
)


def problems(signature: ModelSignature, instances: object) -> list[tuple[Any, str]]:
    """The problems of ``instances`` (an Arrow table, or JSON values)."""
    with pytest.raises(PredictionInputError) as exc:
        if isinstance(instances, pa.Table):
            check_table(signature, instances)
        else:
            check_rows(signature, instances)
    return [(p.loc, p.msg) for p in exc.value.problems]


def same_as_json(signature: ModelSignature, table: pa.Table) -> dict[str, np.ndarray[Any, Any]]:
    """The table's arrays, checked equal (values and dtypes) to its rows sent as JSON."""
    arrays, warnings = check_table(signature, table)
    expected, expected_warnings = check_rows(signature, table.to_pylist())
    assert list(arrays) == list(expected) == [f.name for f in signature.features]
    for name, array in arrays.items():
        assert array.dtype == expected[name].dtype, name
        if array.dtype == object:
            assert [_nan_or(v) for v in array] == [_nan_or(v) for v in expected[name]], name
        else:
            np.testing.assert_array_equal(array, expected[name], strict=True)
    assert warnings == expected_warnings
    return arrays


def _nan_or(value: object) -> object:
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


# --- numbers ----------------------------------------------------------------------------


def test_float64_columns_are_read_without_a_copy() -> None:
    table = pa.table({"b": [0.5, 1.5, -2.0], "a": [1.0, 2.0, 3.0], "note": ["x", "y", "z"]})
    arrays, warnings = check_table(NUMBERS, table)
    assert list(arrays) == ["a", "b"] and warnings == ["extra columns ignored: note"]
    assert np.shares_memory(arrays["a"], table.column("a").chunk(0).to_numpy())
    same_as_json(NUMBERS, table)


def test_tables_of_plain_numbers_checked_at_once_give_what_json_gives() -> None:
    """Float64 columns without nulls, in several record batches, with an extra column:
    checked in one numpy pass (issue 24), the arrays, dtypes and warnings of JSON."""
    first = pa.table({"a": [1.0, -2.5], "b": [3.0, 4.0], "note": [1.0, 2.0]})
    table = pa.concat_tables([first, first.slice(1)])
    assert table.column("a").num_chunks == 2
    arrays = same_as_json(NUMBERS, table)
    assert arrays["a"].tolist() == [1.0, -2.5, -2.5]
    bad = pa.concat_tables([first, pa.table({"a": [1e39], "b": [math.inf], "note": [0.0]})])
    assert problems(NUMBERS, bad) == problems(NUMBERS, bad.to_pylist())  # each row named


def test_integer_and_narrow_float_columns_take_the_dtype_json_numbers_take() -> None:
    big = 2**63 + 5  # beyond int64: a float column, as for JSON integers
    table = pa.table(
        {
            "n": pa.array([1, 2, big], pa.uint64()),
            "x": pa.array([1, 2, 3], pa.int8()),
            "flag": [True, False, True],
            "city": ["oslo", "rome", "lima"],
        }
    )
    arrays = same_as_json(MIXED, table)
    assert arrays["n"].dtype == np.float64 and arrays["x"].dtype == np.float64
    table = table.set_column(0, "n", pa.array([1, -2, 3], pa.int32()))
    table = table.set_column(1, "x", pa.array([0.1, 2.5, -1e30], pa.float32()))
    arrays = same_as_json(MIXED, table)
    assert arrays["n"].dtype == np.int64
    assert arrays["x"].tolist() == [float(np.float32(0.1)), 2.5, float(np.float32(-1e30))]
    table = table.set_column(1, "x", pa.array(np.array([0.5, -1, 2], np.float16)))
    assert same_as_json(MIXED, table)["x"].tolist() == [0.5, -1.0, 2.0]


def test_nulls_are_missing_values_where_the_model_allows_them() -> None:
    table = pa.table(
        {
            "n": pa.array([1, 2, 3], pa.int64()),
            "x": pa.array([1, None, 3], pa.int64()),  # integers with a gap: float64 with NaN
            "flag": pa.array([True, None, False]),
            "city": pa.array([None, "rome", None]),
        }
    )
    arrays = same_as_json(MIXED, table)
    assert math.isnan(arrays["x"][1]) and arrays["flag"][0] is True
    gappy = table.set_column(0, "n", pa.array([None, 2, None], pa.int64()))
    assert problems(MIXED, gappy) == problems(MIXED, gappy.to_pylist())
    assert [loc for loc, _ in problems(MIXED, gappy)] == [
        ("instances", 0, "n"),
        ("instances", 2, "n"),
    ]


def test_nan_and_infinities_are_refused_as_in_json() -> None:
    table = pa.table({"a": [1.0, math.nan, 3.0, -math.inf], "b": [math.inf, 2.0, None, 4.0]})
    found = problems(NUMBERS, table)
    assert found == problems(NUMBERS, table.to_pylist())
    assert found == [
        (("instances", 0, "b"), "expected a finite number, got inf"),
        (("instances", 1, "a"), "expected a finite number, got nan"),
        (
            ("instances", 2, "b"),
            "column 'b' cannot be missing for this model (it had no missing values in training)",
        ),
        (("instances", 3, "a"), "expected a finite number, got -inf"),
    ]


def test_numbers_beyond_float32_are_refused_as_in_json() -> None:
    """Float64 columns only: narrower ones cannot hold such numbers (and null stays missing)."""
    table = pa.table({"a": [1.0, 1e308, 3.4e38, None], "b": [-3.5e38, math.inf, 2.0, 1.0]})
    found = problems(MIXED_NUMBERS, table)
    assert found == problems(MIXED_NUMBERS, table.to_pylist())
    beyond = "expected a number between -3.4028235e+38 and 3.4028235e+38 (float32's range"
    assert [(loc, msg[: len(beyond)]) for loc, msg in found] == [
        (("instances", 0, "b"), beyond),
        (("instances", 1, "a"), beyond),
        (("instances", 1, "b"), "expected a finite number, got inf"),
    ]
    assert found[1][1].endswith("got 1e+308")
    table = pa.table({"a": pa.array([3.4e38, None], pa.float32()), "b": [-3.4e38, 0.0]})
    assert check_table(MIXED_NUMBERS, table).columns["a"][0] == np.float32(3.4e38)


MIXED_NUMBERS = replace(
    NUMBERS, features=(FeatureColumn("a", "float64", True), NUMBERS.features[1])
)


# --- other types ------------------------------------------------------------------------


def test_strings_and_booleans_become_the_object_arrays_of_json_values() -> None:
    table = pa.table(
        {
            "n": pa.array([4, 5, 6, 7], pa.int16()),
            "x": [0.5, None, 1.5, 2.0],
            "flag": [False, True, None, True],
            "city": pa.array(["oslo", None, "oslo", "lima"], pa.large_string()),
        }
    )
    same_as_json(MIXED, table)
    encoded = table.set_column(3, "city", pa.compute.dictionary_encode(table.column("city")))
    assert pa.types.is_dictionary(encoded.column("city").type)
    same_as_json(MIXED, encoded)


def test_unseen_categories_are_warned_of_as_in_json() -> None:
    known = replace(MIXED, categories={"flag": (True,), "city": ("lima", "oslo")})
    table = pa.table(
        {
            "n": [4, 5, 6],
            "x": [0.5, None, 1.5],
            "flag": [False, True, None],
            "city": pa.array(["rome", None, "oslo"], pa.large_string()),
            "note": ["a", "b", "c"],
        }
    )
    expected = [
        "extra columns ignored: note",
        "column 'flag': 1 row has a category not seen in training (False at row 0); "
        "it is encoded as unknown",
        "column 'city': 1 row has a category not seen in training ('rome' at row 0); "
        "it is encoded as unknown",
    ]
    for kind in (table, table.set_column(3, "city", pa.compute.dictionary_encode(table["city"]))):
        same_as_json(known, kind)
        assert check_table(known, kind)[1] == expected
    assert check_table(MIXED, table)[1] == expected[:1]  # no categories recorded


@pytest.mark.parametrize(
    ("column", "values", "msg"),
    [
        ("x", pa.array(["1.5", "2"]), "expected a number, got '1.5'"),
        ("x", pa.array([True, False]), "expected a number, got True"),
        (
            "x",
            pa.array([dt.date(2024, 1, 2)] * 2),
            "expected a number, got datetime.date(2024, 1, 2)",
        ),
        ("flag", pa.array(["yes", "no"]), "expected a boolean, got 'yes'"),
        ("flag", pa.array([1, 0]), "expected a boolean, got 1"),
        ("city", pa.array([1, 2]), "expected a string, got 1"),
        ("city", pa.array([[1], [2]]), "expected a string, got [1]"),
    ],
)
def test_a_column_of_the_wrong_type_is_refused_row_by_row(
    column: str, values: pa.Array, msg: str
) -> None:
    table = pa.table(
        {"n": [1, 2], "x": [0.5, 1.5], "flag": [True, False], "city": ["oslo", "rome"]}
    )
    table = table.set_column(table.column_names.index(column), column, values)
    found = problems(MIXED, table)
    assert found == problems(MIXED, table.to_pylist())
    assert [loc for loc, _ in found] == [("instances", 0, column), ("instances", 1, column)]
    assert found[0][1] == msg


# --- columns and rows -------------------------------------------------------------------


def test_a_missing_column_is_missing_in_every_row_first_problems_shown() -> None:
    table = pa.table({"a": np.arange(60.0)})
    with pytest.raises(PredictionInputError) as exc:
        check_table(NUMBERS, table)
    shown = exc.value.problems
    assert len(shown) == MAX_PROBLEMS
    assert [p.loc for p in shown[:2]] == [("instances", 0, "b"), ("instances", 1, "b")]
    assert {p.msg for p in shown} == {"missing column 'b'"}
    assert exc.value.detail == f"60 problems in the instances (first {MAX_PROBLEMS} shown)"
    assert [(p.loc, p.msg) for p in shown] == problems(NUMBERS, [{"a": 1.0}] * 60)


def test_duplicate_columns_and_pandas_index_columns() -> None:
    duplicated = pa.Table.from_arrays(
        [pa.array([1.0]), pa.array([2.0]), pa.array([3.0])], names=["a", "b", "a"]
    )
    assert problems(NUMBERS, duplicated) == [(("instances", "columns"), "duplicate column 'a'")]
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}, index=[7, 9])
    indexed = pa.Table.from_pandas(frame)
    assert "__index_level_0__" in indexed.column_names
    arrays, warnings = check_table(NUMBERS, indexed)
    assert warnings == [] and arrays["a"].tolist() == [1.0, 2.0]


def test_record_batches_are_one_table() -> None:
    one = pa.table({"a": [1.0, 2.0], "b": [3.0, 4.0]})
    table = pa.concat_tables([one, one, one])
    assert table.column("a").num_chunks == 3
    arrays = same_as_json(NUMBERS, table)
    assert arrays["b"].tolist() == [3.0, 4.0] * 3


def test_row_limits() -> None:
    table = pa.table({"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0, 3.0]})
    with pytest.raises(TooLargeError) as too_many:
        check_table(NUMBERS, table, max_rows=2)
    assert [p.loc for p in too_many.value.problems] == [("instances",)]
    assert len(check_table(NUMBERS, table, max_rows=3)[0]["a"]) == 3
    assert problems(NUMBERS, table.slice(0, 0)) == [
        (("instances",), "no instances: send at least one row")
    ]


def _checked(table: pa.Table) -> tuple[Any, ...]:
    try:
        checked = check_table(NUMBERS, table)
    except PredictionInputError as exc:
        return ("refused", [(p.loc, p.msg) for p in exc.problems])
    arrays = {k: (v.dtype.str, v.tolist()) for k, v in checked.columns.items()}
    return ("checked", arrays, checked.warnings)


def _odd_table(rng: np.random.Generator, n: int, odd: list[float | None]) -> pa.Table:
    """NUMBERS' columns of ``n`` rows with odd cells, sometimes an extra or an int column,
    pandas' index or two batches, drawn from ``rng``."""
    names = [f.name for f in NUMBERS.features]
    columns: dict[str, Any] = {name: rng.normal(0, 10, n).tolist() for name in names}
    for name in rng.choice(names, int(rng.integers(0, 3))):
        columns[str(name)][int(rng.integers(n))] = odd[int(rng.integers(len(odd)))]
    if rng.random() < 0.3:
        columns["extra"] = [1.5] * n
    table = pa.table(columns)
    if rng.random() < 0.2:
        table = table.set_column(0, names[0], pa.array(rng.integers(0, 9, n)))
    if rng.random() < 0.2:
        table = pa.Table.from_pandas(table.to_pandas().set_index(names[-1]))
    if rng.random() < 0.2 and n > 1:
        table = pa.concat_tables([table.slice(0, 1), table.slice(1)])
    return table


@pytest.mark.parametrize("seed", range(30))
def test_a_small_table_read_as_one_matrix_is_checked_as_column_by_column(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """small_tables' one call against the column-by-column way (its SMALL_ROWS at 0):
    the same arrays, warnings and problems, with odd cells, nulls, extra and int
    columns, pandas' index and several batches."""
    rng = np.random.default_rng(seed)
    odd = [math.nan, math.inf, -math.inf, 1e39, -3.5e38, 3.4e38, None, 0.0]
    table = _odd_table(rng, int(rng.integers(1, 6)), odd)
    small = _checked(table)
    monkeypatch.setattr(small_tables, "SMALL_ROWS", 0)
    assert small == _checked(table)


ONLY_B = replace(NUMBERS, features=(FeatureColumn("b", "float64", False),))


def _checked_by(signature: ModelSignature, table: pa.Table) -> tuple[Any, ...]:
    try:
        checked = check_table(signature, table)
    except PredictionInputError as exc:
        return ("refused", [(p.loc, p.msg) for p in exc.problems])
    arrays = {k: (v.dtype.str, v.tolist()) for k, v in checked.columns.items()}
    return ("checked", arrays, checked.warnings)


@pytest.mark.parametrize("seed", range(20))
def test_what_a_schema_says_of_each_signature_is_kept_apart(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One schema read for two signatures, in turn and again (the features' places and
    the extra columns are kept per schema and signature): each answer is the
    column-by-column way's, with columns shuffled, missing, doubled or extra."""
    rng = np.random.default_rng(seed)
    names = [str(n) for n in rng.permutation(["a", "b", "c", "d"])[: int(rng.integers(1, 5))]]
    if rng.random() < 0.25:
        names.append(names[0])  # a duplicate column
    table = pa.Table.from_arrays([pa.array([float(i + 1)]) for i in range(len(names))], names)
    signatures = [NUMBERS, ONLY_B, NUMBERS, ONLY_B]
    small = [_checked_by(s, table) for s in signatures]
    monkeypatch.setattr(small_tables, "SMALL_ROWS", 0)
    assert small == [_checked_by(s, table) for s in signatures]


@pytest.mark.parametrize("seed", range(12))
def test_a_large_table_read_as_one_matrix_is_checked_as_column_by_column(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """small_tables' one call for large tables (LARGE_ROWS rows and more) against the
    column-by-column way (LARGE_ROWS at 0): the same arrays, warnings and problems, with
    odd cells, nulls, extra and int columns, pandas' index and several batches."""
    rng = np.random.default_rng(seed)
    odd = [math.nan, math.inf, -math.inf, 1e39, -3.5e38, 3.4e38, -3.4e38, None, -0.0]
    table = _odd_table(rng, small_tables.LARGE_ROWS + int(rng.integers(0, 50)), odd)
    large = _checked(table)
    monkeypatch.setattr(small_tables, "LARGE_ROWS", 0)
    assert large == _checked(table)


def test_a_large_float_table_is_checked_into_the_matrix_the_model_reads_without_a_copy() -> None:
    """A large table of the features' float64 columns, in order, is checked into views
    of one row-major matrix, which the passthrough preprocessing reads as it is: the same
    float64 bits as stacking the table's columns (before, the columns were concatenated
    to be checked and stacked again for the model)."""
    rng = np.random.default_rng(7)
    n = small_tables.LARGE_ROWS * 3
    values = rng.normal(0, 1e3, (n, 2))
    values[:5] = [[-0.0, 0.0], [3.4e38, -3.4e38], [1e-310, -1e-310], [5e-324, 1.0], [2.5, -2.5]]
    table = pa.table({"a": values[:, 0], "b": values[:, 1]})
    checked, warnings = check_table(NUMBERS, table)
    assert warnings == []
    matrix = servable.stack_columns(checked, ("a", "b"))
    expected = np.column_stack([c.to_numpy() for c in table.columns])
    assert matrix.dtype == np.float64 and matrix.flags["C_CONTIGUOUS"]
    assert np.array_equal(matrix.view(np.int64), expected.view(np.int64))
    assert servable.one_matrix(list(checked.values())) is not None
    assert np.shares_memory(matrix, checked["a"]) and np.shares_memory(matrix, checked["b"])


@pytest.mark.parametrize("order", [["a", "b"], ["b", "note", "a"]])
def test_a_small_float_table_is_checked_into_one_matrix_the_batch_joins_in_one_call(
    order: list[str],
) -> None:
    """A small table of float64 columns (the features in order, or shuffled among
    others) is checked into the columns of one matrix (:class:`MatrixColumns`): a batch
    of such requests is joined by one concatenation and the model copies it as it is,
    where 30 columns of a one-row request were concatenated one by one, then stacked
    (issue 24).  The joined rows are the float64 bits of the tables' own columns."""
    rng = np.random.default_rng(3)
    parts: list[Any] = []
    expected = []
    for _ in range(3):
        values: dict[str, Any] = {"a": rng.normal(0, 1e3, 1), "b": rng.normal(0, 1e3, 1)}
        values["note"] = [2.0]
        values["a"][0] = -0.0 if not parts else values["a"][0]
        table = pa.table({name: values[name] for name in order})
        checked, warnings = check_table(NUMBERS, table)
        assert type(checked) is cells.MatrixColumns and checked.names == ("a", "b")
        assert warnings == (["extra columns ignored: note"] if "note" in order else [])
        parts.append(checked)
        expected.append([table.column("a").to_numpy(), table.column("b").to_numpy()])
    joined = batches.concat_columns(parts)
    assert type(joined) is cells.MatrixColumns and joined.matrix is not None
    matrix = servable.stack_columns(joined, ("a", "b"))
    stacked = np.vstack([np.column_stack(columns) for columns in expected])
    assert np.array_equal(matrix.view(np.int64), stacked.view(np.int64))


def _rows_of(found: Any) -> tuple[Any, ...] | None:
    """A ``(MatrixRows, warnings)`` as names, dtype, shape, value bits and warnings."""
    if found is None:
        return None
    rows, warnings = found
    matrix = rows.matrix
    return (rows.names, matrix.dtype.str, matrix.shape, matrix.tobytes(), warnings)


CATEGORICAL = replace(
    NUMBERS,
    features=(*NUMBERS.features, FeatureColumn("c", "string", False)),
    categories={"c": ("x", "y")},
)


@pytest.mark.parametrize("seed", range(40))
def test_one_row_checked_from_its_values_is_the_one_row_matrix_s_check(seed: int) -> None:
    """``small_float_row`` (a one-row Arrow body's values, viewed in its bytes) gives what
    ``small_float_rows`` gives for that row as a one-row matrix: the same names, the same
    float64 bits in the features' order, the same warnings, or None alike; with odd cells
    (NaN, infinities, beyond float32's range, -0.0, subnormals), columns shuffled,
    missing, doubled or extra, pandas' index, and a signature with categories.  The
    values it was given are never changed, and its matrix is its own."""
    rng = np.random.default_rng(seed)
    odd = [math.nan, math.inf, -math.inf, 1e39, -3.5e38, 3.4e38, -0.0, 5e-324, 1e-310]
    names = [str(n) for n in rng.permutation(["a", "b", "c", "d"])[: int(rng.integers(1, 5))]]
    if rng.random() < 0.2:
        names.append(names[0])  # a duplicate column
    values = rng.normal(0, 10, len(names))
    for j in rng.choice(len(names), int(rng.integers(0, 3))):
        values[int(j)] = odd[int(rng.integers(len(odd)))]
    table = pa.Table.from_arrays([pa.array([float(v)]) for v in values], names)
    if rng.random() < 0.2 and "d" in names and not np.isnan(values).any():
        table = pa.Table.from_pandas(table.to_pandas().set_index("d"))  # (NaN: a null)
    schema = table.schema
    row = np.asarray(table.to_batches()[0].to_tensor(row_major=True).to_numpy())[0]
    kept = row.tobytes()
    for signature in (NUMBERS, ONLY_B, CATEGORICAL):
        expected = small_tables.small_float_rows(signature, schema, row.reshape(1, -1).copy())
        found = small_tables.small_float_row(signature, schema, row)
        assert _rows_of(found) == _rows_of(expected)
        if found is not None:
            assert not np.shares_memory(found[0].matrix, row)
            assert found[0].matrix.flags.c_contiguous and found[0].matrix.flags.writeable
    assert row.tobytes() == kept
    view = np.frombuffer(row.tobytes(), "<f8")  # read-only, as a request's bytes
    assert _rows_of(small_tables.small_float_row(NUMBERS, schema, view)) == _rows_of(
        small_tables.small_float_rows(NUMBERS, schema, row.reshape(1, -1).copy())
    )
    assert small_tables.small_float_row(NUMBERS, schema, row.astype(np.float32)) is None
