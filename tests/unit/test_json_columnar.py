"""Columnar JSON numbers read straight into one float64 matrix (app.json_numbers): the
very numbers orjson reads, and None (the usual parse and cell checks) for anything else."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pytest

from app.json_numbers import MIN_BYTES, read_numeric_columnar

COLUMNS = ["a", "b", "c"]


def table(n: int = 600) -> list[list[Any]]:
    """Ints, floats, negative zero, tiny and large magnitudes: every cell exact in float64."""
    rng = np.random.default_rng(7)
    rows: list[list[Any]] = rng.normal(0, 1e3, (n, 3)).tolist()
    for i in range(0, n, 7):
        rows[i][0] = int(rng.integers(-(2**40), 2**40))
    rows[1] = [-0.0, 5e-324, 2.0**53 - 1]
    rows[2] = [0, -1, 1e-300]
    return rows


def body(data: Any, columns: Any = COLUMNS, **extra: Any) -> bytes:
    document = {"instances": {"columns": columns, "data": data}, **extra}
    text = json.dumps(document).encode()
    assert len(text) >= MIN_BYTES
    return text


def test_numbers_are_the_ones_orjson_reads_bit_for_bit() -> None:
    data = table()
    read = read_numeric_columnar(body(data, options={"return_proba": True}))
    assert read is not None
    expected = np.asarray(orjson.loads(body(data))["instances"]["data"], dtype=np.float64)
    assert read.columns == COLUMNS
    assert read.data.dtype == np.float64 and read.data.shape == (len(data), 3)
    assert read.data.tobytes() == expected.tobytes()  # -0.0 and subnormals included
    assert read.options == {"return_proba": True}


def test_options_are_optional_and_a_bracket_in_a_column_name_is_fine() -> None:
    read = read_numeric_columnar(body(table(), columns=["a[0]", "b", "[c]"]))
    assert read is not None and read.options is None
    assert read.columns == ["a[0]", "b", "[c]"]


def _with(cell: Any, row: int = 450, column: int = 1) -> list[list[Any]]:
    data = table()
    data[row][column] = cell
    return data


@pytest.mark.parametrize(
    "cell",
    [None, "1.5", True, False, 2**53, -(2.0**60), 2**64, {"x": 1}, [2.0], []],
    ids=repr,
)
def test_a_cell_that_is_not_a_plain_exact_number_leaves_it_to_the_usual_path(cell: Any) -> None:
    assert read_numeric_columnar(body(_with(cell))) is None


def test_ragged_rows_with_the_right_total_are_not_read() -> None:
    data = table()
    data[10] = [1.0, 2.0]
    data[11] = [1.0, 2.0, 3.0, 4.0]
    assert read_numeric_columnar(body(data)) is None


def test_a_row_that_is_not_a_list_is_not_read() -> None:
    data: list[Any] = table()
    data[3] = "abc"  # as long as a row: still not one
    assert read_numeric_columnar(body(data)) is None
    data[3] = {"a": 1, "b": 2, "c": 3}
    assert read_numeric_columnar(body(data)) is None


@pytest.mark.parametrize(
    "text",
    [
        # a repeated key: orjson keeps the last value, simdjson the first
        b'{"instances": {"columns": ["a"], "data": [[1]]}, "instances": %s}',
        b'{"instances": %s, "extra": 1}',
        b'{"instances": %s, "options": [1]}',
        b'{"instances": %s, "options": {"return_proba": true}',  # not JSON
        b"[%s]",
    ],
)
def test_other_documents_are_not_read(text: bytes) -> None:
    instances = json.dumps({"columns": COLUMNS, "data": table()}).encode()
    assert read_numeric_columnar(text.replace(b"%s", instances)) is None


def test_other_instances_are_not_read() -> None:
    data = table()
    records = [dict(zip(COLUMNS, row, strict=True)) for row in data]
    assert read_numeric_columnar(json.dumps({"instances": records}).encode()) is None
    extra = {"columns": COLUMNS, "data": data, "more": 1}
    assert read_numeric_columnar(json.dumps({"instances": extra}).encode()) is None
    assert read_numeric_columnar(body(data, columns=["a", "b", 3])) is None
    assert read_numeric_columnar(body(data, columns=["a", "b"])) is None
    nan = body(data).replace(b"-0.0", b"NaN", 1)  # not JSON: the usual parser answers
    assert read_numeric_columnar(nan) is None


def test_small_bodies_are_left_to_orjson() -> None:
    assert read_numeric_columnar(b'{"instances": {"columns": ["a"], "data": [[1]]}}') is None
