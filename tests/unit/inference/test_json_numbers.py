"""Numeric JSON rows go into one float64 array in one numpy pass; a bool among the numbers
(which numpy reads as 0 or 1) still takes the careful path and is refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ensembles.builders import FeatureColumn
from ensembles.errors import PredictionInputError
from ensembles.inference import rows
from ensembles.inference.rows import check_rows
from ensembles.signature import ModelSignature

NAMES = ["a", "b", "c"]
SIGNATURE = ModelSignature(
    "regression",
    "random_forest",
    tuple(FeatureColumn(n, "float64", False) for n in NAMES),
    None,
    None,
)


def columnar(data: list[list[Any]]) -> dict[str, Any]:
    return {"columns": NAMES, "data": data}


def ones_and_zeros(n: int) -> list[list[Any]]:
    rng = np.random.default_rng(0)
    out: list[list[Any]] = rng.integers(0, 2, (n, 3)).tolist()
    return out


@pytest.mark.parametrize("mostly_binary", [True, False])
@pytest.mark.parametrize("bool_cell", [True, False, np.bool_(True)])
def test_a_bool_among_numbers_is_found(mostly_binary: bool, bool_cell: object) -> None:
    data = ones_and_zeros(200) if mostly_binary else [[2.5, 3.5, 4.5] for _ in range(200)]
    assert rows._numeric_columns(SIGNATURE, columnar(data), None) is not None
    data[150][1] = bool_cell
    assert rows._numeric_columns(SIGNATURE, columnar(data), None) is None
    with pytest.raises(PredictionInputError) as exc:
        check_rows(SIGNATURE, columnar(data))
    assert [p.loc for p in exc.value.problems] == [("instances", 150, "b")]


def test_ones_and_zeros_and_mixed_ints_and_floats_take_the_fast_path() -> None:
    data = ones_and_zeros(50)
    data[3] = [0.5, 1, -0.0]
    arrays, _ = check_rows(SIGNATURE, columnar(data))
    assert all(a.dtype == np.float64 for a in arrays.values())
    assert arrays["a"].tolist() == [float(r[0]) for r in data]


@pytest.mark.parametrize("value", [2.0**53, -(2.0**60), 2**53, 3.4e38])
def test_magnitudes_beyond_exact_integers_take_the_careful_path(value: float) -> None:
    data = [[1.0, 2.0, 3.0], [value, 2.0, 3.0]]
    assert rows._numeric_columns(SIGNATURE, columnar(data), None) is None
    arrays, _ = check_rows(SIGNATURE, columnar(data))
    assert arrays["a"].tolist() == [1.0, float(value)]


def test_rows_of_other_lengths_or_kinds_take_the_careful_path() -> None:
    for data in ([[1.0, 2.0, 3.0], (1.0, 2.0, 3.0)], [[1.0, 2.0, 3.0], [1.0, 2.0]]):
        assert rows._numeric_columns(SIGNATURE, columnar(data), None) is None
    records: list[Any] = [{"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 1.0, "b": 2.0, "c": 3.0, "d": 0}]
    arrays, warnings = check_rows(SIGNATURE, records)
    assert warnings == ["extra columns ignored: d"] and arrays["c"].tolist() == [3.0, 3.0]


BEYOND_FLOAT32 = [1e308, -1e300, 3.5e38, 3.4028236e38, 10**39, -(10**400), np.float64(1e300)]


@pytest.mark.parametrize("value", BEYOND_FLOAT32, ids=repr)
def test_numbers_beyond_float32_are_refused_naming_row_and_column(value: Any) -> None:
    """scikit-learn's trees cast rows to float32 and raised on such a value (a 500); every
    kind is held to float32's range, records and columnar alike."""
    data = [[1.0, 2.0, 3.0], [1.0, 2.0, value]]
    for instances in (columnar(data), [dict(zip(NAMES, row, strict=True)) for row in data]):
        with pytest.raises(PredictionInputError) as exc:
            check_rows(SIGNATURE, instances)
        (problem,) = exc.value.problems
        assert problem.loc == ("instances", 1, "c")
        assert problem.msg.startswith(
            "expected a number between -3.4028235e+38 and 3.4028235e+38 (float32's range"
        )


@pytest.mark.parametrize("value", [3.4e38, -3.4028235e38, float(np.finfo(np.float32).max)])
def test_float32_s_largest_numbers_are_taken(value: float) -> None:
    arrays, _ = check_rows(SIGNATURE, columnar([[value, 2.0, 3.0]]))
    assert arrays["a"].tolist() == [value] and np.isfinite(np.float32(value))


EDGES = [0.0, -0.0, 5e-324, 1.5, 2.0**53 - 1, -(2.0**53 - 1), 2.0**53, -(2.0**53), 1e300]
NON_FINITE = [np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("value", EDGES + NON_FINITE)
@pytest.mark.parametrize("where", [0, 5, -1])
def test_exact_floats_is_the_finite_and_abs_below_2_53_rule(value: float, where: int) -> None:
    """The two reductions answer as ``isfinite(t).all() and abs(t).max() < 2**53``, the
    rule both fast paths (the matrix of app.json_numbers, check_rows) held before."""
    table = np.random.default_rng(3).normal(0, 1e6, (40, 3))
    table.flat[where] = value
    expected = bool(np.isfinite(table).all() and np.abs(table).max() < 2**53)
    assert rows.exact_floats(table) is expected
    assert rows.exact_floats(table.T) is expected  # any layout (a view of the matrix)
    matrix = rows._float_matrix(table, 3)
    assert (matrix is table) is expected
