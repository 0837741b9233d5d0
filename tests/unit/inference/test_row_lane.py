"""The lane of lone checked rows (``Servable.predict_row``: a one-row Arrow body read
from its bytes and checked, answered alone) answers exactly what predicting the row's
columns (``Servable.predict`` of the ``MatrixColumns`` the batcher made of it) answers,
bit for bit, or declines (None) and leaves it to that: over random rows within float32's
range (what ``small_float_rows`` lets through: -0.0, subnormals, the range's edges),
every option a request may ask, and every model kind of ``test_record_lane``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ensembles.errors import PredictionInputError
from ensembles.inference import PredictOptions
from ensembles.inference.cells import FLOAT32_LIMIT, MatrixRows
from tests.unit.inference.test_batches import servable
from tests.unit.inference.test_record_lane import ALL_KINDS, OPTIONS, _more_kinds, assert_bits

__all__ = ["_more_kinds"]  # (the fixture that builds the other kinds)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

CELLS = st.one_of(
    st.floats(-FLOAT32_LIMIT, FLOAT32_LIMIT, allow_nan=False, width=64),
    st.floats(-10.0, 10.0, width=64),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 1e-35, FLOAT32_LIMIT, -FLOAT32_LIMIT, 0.5]),
)


def general(server: Any, names: tuple[str, ...], row: Any, options: PredictOptions) -> Any:
    """What the batcher answers a lone row with, without the lane."""
    try:
        return server.predict(MatrixRows(names, row.copy()).columns(), options)
    except PredictionInputError as exc:
        return exc


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    kind=st.sampled_from(ALL_KINDS),
    options=st.sampled_from([*OPTIONS[:2] * 4, *OPTIONS]),
)
def test_the_lane_answers_a_lone_row_as_predict_does(
    data: st.DataObject, kind: str, options: PredictOptions
) -> None:
    server = servable(kind)
    names = tuple(server.signature.feature_names)
    cells = data.draw(st.lists(CELLS, min_size=len(names), max_size=len(names)))
    row = np.array([cells], dtype=np.float64)
    kept = row.copy()
    found = server.predict_row(names, row, options)
    event(f"{kind}: {'lane' if found is not None else 'declined'}")
    assert row.tobytes() == kept.tobytes()  # the row is not changed
    if found is None:
        return
    want = general(server, names, row, options)
    assert not isinstance(want, Exception), want
    assert_bits(found, want)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_good_rows_take_the_lane(kind: str) -> None:
    """Rows of a passthrough model are the lane's (else it would test nothing)."""
    server = servable(kind)
    names = tuple(server.signature.feature_names)
    row = np.full((1, len(names)), 1.25)
    found = server.predict_row(names, row, PredictOptions())
    assert (found is not None) == (server.passthrough == names)
    if found is not None:
        assert_bits(found, general(server, names, row, PredictOptions()))


def test_the_lane_declines_rows_it_cannot_vouch_for() -> None:
    server = servable("forest")
    names = tuple(server.signature.feature_names)
    row = np.full((1, len(names)), 1.0)
    proba = PredictOptions(return_proba=True)
    assert server.predict_row(names, row, proba) is not None
    assert server.predict_row(names[::-1], row, proba) is None  # another order
    assert server.predict_row(names[:-1], row[:, :-1].copy(), proba) is None  # a column short
    assert server.predict_row(names, np.ones((2, len(names))), proba) is None  # two rows
    assert server.predict_row(names, row.astype(np.float32), proba) is None
    wide = np.ones((1, 2 * len(names)))
    assert server.predict_row(names, wide[:, ::2], proba) is None  # not C-ordered
    assert server.predict_row(names, row, PredictOptions(return_votes=True)) is None
    assert server.predict_row(names, row, PredictOptions(voting="hard")) is None
    regressor = servable("regressor")
    rnames = tuple(regressor.signature.feature_names)
    assert regressor.predict_row(rnames, np.ones((1, len(rnames))), proba) is None  # its 422
