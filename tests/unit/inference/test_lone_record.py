"""A lone one-record request's quick check (``check_rows``' fast path: one C call for the
record's cells, one type check, one bound check) answers as the careful path does: the
same rows (the same numbers; the careful path keeps integer columns as int64), the same
warnings, and for a bad record the same 422 naming the same cells, over random records
with NaN, infinities, huge numbers, strings, bools, None, missing and extra fields."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ensembles.errors import EnsembleError
from ensembles.inference import CheckedColumns, check_rows, rows
from tests.unit.inference.test_batches import servable
from tests.unit.inference.test_records_together import records

ODD = st.sampled_from(
    [np.nan, np.inf, -np.inf, 2.0**53, -(2.0**53), 2**53 + 1, -(2**53) - 1, 3.5e38, 1e300, -0.0]
)


@st.composite
def lone_records(draw: st.DrawFn, names: tuple[str, ...]) -> object:
    """A record of :func:`records`, or one whose cells include NaN and infinities (as
    ``app.json_numbers`` and pydantic's parser may give them)."""
    record = draw(records(names))
    if isinstance(record, dict) and draw(st.booleans()):
        for name in draw(st.lists(st.sampled_from(names), max_size=3)):
            record[name] = draw(ODD)
    return record


def outcome(signature: Any, record: object) -> CheckedColumns | EnsembleError:
    try:
        return check_rows(signature, [record])
    except EnsembleError as exc:
        return exc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_lone_record_checked_quickly_is_the_record_checked_carefully(
    data: st.DataObject,
) -> None:
    signature = servable("forest").signature
    names = tuple(signature.feature_names)
    record = data.draw(lone_records(names))
    quick = outcome(signature, record)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rows, "_numeric_columns", lambda *_: None)  # the careful path only
        careful = outcome(signature, record)
    if isinstance(careful, EnsembleError):
        event("refused")
        assert isinstance(quick, EnsembleError)
        assert type(quick) is type(careful) and quick.detail == careful.detail
        assert quick.problems == careful.problems  # the same cells named, same words
        return
    event("taken")
    assert isinstance(quick, CheckedColumns)
    assert quick.warnings == careful.warnings
    assert list(quick.columns) == list(careful.columns) == list(names)
    for name in names:
        ours, theirs = quick.columns[name], careful.columns[name]
        assert ours.dtype == np.float64
        assert ours.tobytes() == theirs.astype(np.float64).tobytes()  # -0.0 stays -0.0
        # The same numbers, not only after a cast: an int the careful path keeps as int64
        # must be one a float64 holds exactly (Python compares int and float exactly).
        pairs = zip(ours.tolist(), theirs.tolist(), strict=True)
        assert all(a == b or (a != a and b != b) for a, b in pairs)
