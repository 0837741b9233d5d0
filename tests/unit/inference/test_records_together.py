"""One-record requests checked together (``check_records_together``, for the event loop's
batches) give, row for row and bit for bit, what each gets checked alone by
``check_rows``, and nothing at all (None) whenever any of them, alone, would take the
careful path or get a warning."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ensembles.errors import EnsembleError
from ensembles.inference import CheckedColumns, check_records_together, check_rows
from ensembles.inference.cells import MatrixColumns
from tests.unit.inference.test_batches import servable

# What a cell may be: plain numbers (most of the time), and each way a record can leave
# the fast path alone (a bool, a string, None, a list, ints a float64 may round or that
# overflow an int64, infinities written as huge floats).
CELLS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.integers(-(2**70), 2**70),
    st.sampled_from([True, False, None, "1.5", [1.0], 2**53, -(2**53), 1e300, -0.0, 0]),
)


@st.composite
def records(draw: st.DrawFn, names: tuple[str, ...]) -> object:
    """A request's one record: most often good numbers; else odd cells, a column missing
    or an extra one, or not a record at all."""
    plain = st.one_of(st.floats(-1e6, 1e6), st.integers(-1000, 1000))
    if draw(st.integers(0, 9)) < 8:  # most records of a batch are good ones
        return {n: draw(plain) for n in names}
    shape = draw(st.sampled_from(["plain"] * 3 + ["missing", "extra", "renamed", "list"]))
    cells = st.one_of(plain, CELLS)
    record: dict[str, Any] = {n: draw(cells) for n in names}
    if shape == "missing":
        record.pop(draw(st.sampled_from(names)))
    elif shape == "extra":
        record["colour"] = draw(plain)
    elif shape == "renamed":
        record["Sepal"] = record.pop(draw(st.sampled_from(names)))
    elif shape == "list":
        return list(record.values())
    return record


def alone(signature: Any, record: object) -> CheckedColumns | EnsembleError:
    try:
        return check_rows(signature, [record])
    except EnsembleError as exc:
        return exc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_records_checked_together_are_the_records_checked_alone(data: st.DataObject) -> None:
    signature = servable("forest").signature
    names = tuple(signature.feature_names)
    batch = data.draw(st.lists(records(names), min_size=1, max_size=12))
    one_by_one = [alone(signature, record) for record in batch]
    together = check_records_together(signature, batch)
    fast = [
        isinstance(one, CheckedColumns) and type(one.columns) is MatrixColumns and not one.warnings
        for one in one_by_one
    ]
    assert (together is not None) == all(fast)
    event("checked together" if together is not None else "each alone")
    if together is None:
        return
    assert together.warnings == []
    assert type(together.columns) is MatrixColumns and together.columns.names == names
    stacked = np.vstack([one.columns.matrix for one in one_by_one])  # type: ignore[union-attr]
    matrix = together.columns.matrix
    assert matrix is not None and matrix.dtype == np.float64 == stacked.dtype
    assert matrix.tobytes() == stacked.tobytes()  # bit for bit (-0.0 stays -0.0)
    for name in names:
        assert together.columns[name].tobytes() == stacked[:, names.index(name)].tobytes()


def test_nothing_to_check_together_gives_none() -> None:
    signature = servable("forest").signature
    assert check_records_together(signature, []) is None
