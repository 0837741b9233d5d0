"""A column's cells checked in one pass in C (cells.check_column) give exactly what the
cell-by-cell scan gives: the same arrays when every cell is fine, the same problems (row,
message) when one is not, whatever the mix of values; and big columnar bodies name a bad
cell deep inside them by row and column."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from ensembles.builders import FeatureColumn
from ensembles.errors import PredictionInputError
from ensembles.inference.cells import ABSENT, SKIP, build_array, check_column, scan_cells
from ensembles.inference.rows import check_rows
from ensembles.signature import ModelSignature

ODD_CELLS: list[Any] = [
    None,
    True,
    False,
    np.bool_(True),
    "x",
    "",
    math.nan,
    math.inf,
    -math.inf,
    2**70,
    10**400,
    -(2**63),
    3.5e38,
    -3.4028235e38,
    np.float32(1.5),
    np.int64(7),
    [1.0],
    {"a": 1},
    ABSENT,
    SKIP,
]
DTYPES = ["int64", "float64", "bool", "string"]


def plain(dtype: str, n: int, rng: np.random.Generator) -> list[Any]:
    """Cells that are fine for the column type."""
    if dtype == "int64":
        return rng.integers(-1000, 1000, n).tolist()
    if dtype == "float64":
        cells: list[Any] = rng.normal(0, 100, n).tolist()
        cells[::5] = rng.integers(0, 2, len(cells[::5])).tolist()  # ints, zeros and ones
        return cells
    if dtype == "bool":
        return (rng.random(n) < 0.5).tolist()
    return rng.choice(["oslo", "rome", "lima"], n).tolist()


def reference(
    column: FeatureColumn, cells: list[Any], allow_missing: bool
) -> tuple[Any, np.ndarray[Any, Any] | None]:
    """The cell-by-cell path every cell used to take."""
    bad = scan_cells(column, cells, allow_missing, "absent!")
    refused = bad[1] or any(cell is SKIP for cell in cells)  # a row refused as a whole
    return bad, None if refused else build_array(column, cells)


def same_array(got: np.ndarray[Any, Any] | None, want: np.ndarray[Any, Any] | None) -> bool:
    if got is None or want is None:
        return got is None and want is None
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    return all(
        (g is w) or (g == w and type(g) is type(w)) or (g != g and w != w)
        for g, w in zip(got.tolist(), want.tolist(), strict=True)
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("allow_missing", [True, False])
def test_any_mix_of_cells_gives_what_the_cell_by_cell_scan_gives(
    dtype: str, allow_missing: bool
) -> None:
    rng = np.random.default_rng([DTYPES.index(dtype), int(allow_missing)])
    column = FeatureColumn("c", dtype, allow_missing)
    for trial in range(300):
        cells = plain(dtype, int(rng.integers(1, 40)), rng)
        for _ in range(int(rng.integers(0, 3)) if trial % 3 else 0):
            odd = ODD_CELLS[int(rng.integers(0, len(ODD_CELLS)))]
            cells[int(rng.integers(0, len(cells)))] = odd
        if trial % 50 == 0:
            cells = [None] * len(cells)
        got_bad, got = check_column(column, cells, allow_missing, "absent!")
        want_bad, want = reference(column, cells, allow_missing)
        assert got_bad == want_bad, cells
        assert same_array(got, want), (cells, got, want)


def test_complete_int_columns_stay_int64_and_columns_with_gaps_become_float64() -> None:
    column = FeatureColumn("age", "int64", True)
    assert check_column(column, [1, 2, 3], True)[1].dtype == np.int64  # type: ignore[union-attr]
    gaps = check_column(column, [1, None, 3], True)[1]
    assert gaps is not None and gaps.dtype == np.float64 and math.isnan(gaps[1])
    floats = check_column(column, [1, 2.5, 3], True)[1]
    assert floats is not None and floats.dtype == np.float64


MIXED = ModelSignature(
    "classification",
    "random_forest",
    (
        FeatureColumn("age", "int64", False),
        FeatureColumn("income", "float64", True),
        FeatureColumn("member", "bool", True),
        FeatureColumn("city", "string", True),
    ),
    ("no", "yes"),
    None,
)
NUMERIC = ModelSignature(
    "regression",
    "random_forest",
    tuple(FeatureColumn(n, "float64", False) for n in ("a", "b", "c")),
    None,
    None,
)


def mixed_rows(n: int) -> list[list[Any]]:
    rng = np.random.default_rng(3)
    return [
        [int(a), None if i % 11 == 0 else float(x), bool(m), str(c)]
        for i, (a, x, m, c) in enumerate(
            zip(
                rng.integers(18, 80, n),
                rng.normal(50, 10, n),
                rng.random(n) < 0.5,
                rng.choice(["oslo", "rome", "lima"], n),
                strict=True,
            )
        )
    ]


def columnar(rows: list[list[Any]]) -> dict[str, Any]:
    return {"columns": ["age", "income", "member", "city"], "data": rows}


def test_big_mixed_columnar_bodies_give_the_arrays_records_give() -> None:
    rows = mixed_rows(10_000)
    names = ["age", "income", "member", "city"]
    columns, warnings = check_rows(MIXED, columnar(rows))
    records, _ = check_rows(MIXED, [dict(zip(names, r, strict=True)) for r in rows])
    assert warnings == []
    assert [columns[n].dtype for n in names] == [np.int64, np.float64, object, object]
    for name in names:
        assert same_array(columns[name], records[name])
        assert same_array(
            columns[name],
            build_array(MIXED.features[names.index(name)], [r[names.index(name)] for r in rows]),
        )


@pytest.mark.parametrize(
    ("column", "cell", "message"),
    [
        ("age", None, "column 'age' cannot be missing for this model"),
        ("age", "30", "expected a number, got '30'"),
        ("age", True, "expected a number, got True"),
        ("income", math.nan, "expected a finite number, got nan"),
        ("income", 2**200, "expected a number between"),
        ("member", "yes", "expected a boolean, got 'yes'"),
        ("city", 5, "expected a string, got 5"),
    ],
)
def test_a_bad_cell_deep_in_a_big_body_is_named_by_row_and_column(
    column: str, cell: Any, message: str
) -> None:
    rows = mixed_rows(10_000)
    rows[9_876][["age", "income", "member", "city"].index(column)] = cell
    with pytest.raises(PredictionInputError) as exc:
        check_rows(MIXED, columnar(rows))
    assert [p.loc for p in exc.value.problems] == [("instances", 9_876, column)]
    assert exc.value.problems[0].msg.startswith(message)


def test_numbers_read_into_a_matrix_are_checked_as_the_same_lists() -> None:
    rng = np.random.default_rng(5)
    matrix = rng.normal(0, 1, (500, 3))
    matrix[::9, 0] = rng.integers(0, 5, len(matrix[::9]))
    header = ["c", "a", "b"]
    lists, _ = check_rows(NUMERIC, {"columns": header, "data": matrix.tolist()})
    arrays, _ = check_rows(NUMERIC, {"columns": header, "data": matrix})
    for name in ("a", "b", "c"):
        assert arrays[name].tobytes() == lists[name].tobytes()
    # A model with other features (or an odd header) checks the matrix's cells as lists.
    with pytest.raises(PredictionInputError) as exc:
        check_rows(MIXED, {"columns": header, "data": matrix})
    assert [p.msg for p in exc.value.problems][:1] == ["missing column 'age'"]
    with pytest.raises(PredictionInputError) as exc:
        check_rows(NUMERIC, {"columns": ["a", "a", "b"], "data": matrix})
    assert [p.msg for p in exc.value.problems] == [
        "duplicate column 'a'",
        "missing column 'c'",
    ]


NUMERIC = ModelSignature(
    "classification",
    "random_forest",
    tuple(FeatureColumn(name, "float64", False) for name in ("a", "b", "c")),
    (0, 1),
    None,
)


def _outcome(records: list[Any], n: int) -> tuple[Any, ...]:
    """What check_rows gives for ``records``, cut to their first ``n`` rows."""
    try:
        checked = check_rows(NUMERIC, records)
    except PredictionInputError as exc:
        return ("refused", [(p.loc, p.msg) for p in exc.problems if p.loc[1] < n])
    arrays = {k: (v.dtype.str, v[:n].tolist()) for k, v in checked.columns.items()}
    return ("checked", arrays, checked.warnings)


@pytest.mark.parametrize("seed", range(40))
def test_one_record_and_a_few_are_checked_as_in_a_big_body(seed: int) -> None:
    """One record (one C call for its cells) and up to 16 (every cell's type looked at)
    take their own ways: the arrays, warnings and problems of those rows are what the
    same rows give among many (the way of big bodies)."""
    rng = np.random.default_rng(seed)
    cells: list[Any] = [*ODD_CELLS[:-2], 0, 1, 1.0, 0.0, -2, 2**53, 2**53 - 1, 7.25]
    n = int(rng.integers(1, 5))
    records: list[Any] = []
    for _ in range(n):
        record = {name: 0.5 + rng.random() for name in "abc"}
        for name in rng.choice(list("abc"), int(rng.integers(0, 3)), replace=False):
            record[str(name)] = cells[int(rng.integers(len(cells)))]
        if rng.random() < 0.2:
            record["extra"] = 1
        if rng.random() < 0.1:
            del record["b"]
        records.append(record)
    many = records * (17 // n + 1)
    assert _outcome(records, n) == _outcome(many, n)
    assert _outcome(records[:1], 1) == _outcome(records[:1] * 17, 1)
