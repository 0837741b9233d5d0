"""A lone record's class from its cells (``CompiledModel.cells_class``,
``gtil_call.predict_cells``, ``one_row.record_cells``) is the array way's, bit for bit:

* ``record_cells`` takes exactly the records the numpy rule took (cells read into a
  float64 row, ``abs(row).max() < 2**53``) over floats of every bit pattern, NaN, the
  infinities, -0.0 and ints around 2**53, 2**63 and beyond a float;
* GTIL given the cells (cast to float32 by the ``array`` module) scores what it scores
  given the row cast by numpy, over cells within float32's range (subnormals, the
  float32 limit, ints up to 2**53);
* ``cells_class`` gives ``row_class``'s class and probabilities (identity and expit
  links; multiclass and binary), or declines where it declines;
* the lane of lone records answers through it (not through the row's arrays).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ensembles.inference import CompiledModel, PredictOptions
from ensembles.inference.gtil import _CONFIGS, _PREDICT_WITH_CONFIG
from ensembles.inference.gtil_call import predict_cells, predict_direct
from ensembles.inference.one_row import RowLane, record_cells, row_lane
from tests.unit.inference import test_batches
from tests.unit.inference.test_batches import KINDS, servable

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
MORE: dict[str, tuple[str, dict[str, Any], list[PredictOptions]]] = {
    "binary_boosting": (
        "breast_cancer",
        {"kind": "gradient_boosting", "params": {"n_estimators": 10}},
        [],
    ),
    "binary_forest": (
        "breast_cancer",
        {"kind": "random_forest", "params": {"n_estimators": 10}},
        [],
    ),
}
COMPILED = ["forest", "binary_forest", "binary_boosting", "boosting", "lightgbm"]
FLOAT32_MAX = float(np.finfo(np.float32).max)


@pytest.fixture(autouse=True, scope="module")
def _more_kinds() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(test_batches, "KINDS", {**KINDS, **MORE})
        yield


def engine_of(kind: str) -> CompiledModel:
    engine = servable(kind).engine_for(1)
    assert isinstance(engine, CompiledModel)
    return engine


def numpy_rule(cells: tuple[Any, ...]) -> bool:
    """The lane's bound as it was held: the cells read into a float64 row, then
    ``abs(row).max() < 2**53`` (NaN and the infinities fail it)."""
    try:
        row = np.array(cells, dtype=np.float64)
    except (OverflowError, ValueError, TypeError):
        return False
    return bool(np.abs(row).max() < 2**53)


EDGES = [2**53 - 1, 2**53, 2**53 + 1, 2**63, 2**64, 10**308, 10**309, 10**400, 0, 1, -1]
CELLS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([*EDGES, *(-e for e in EDGES)]),
    st.sampled_from([float(2**53), float(2**53 - 1), -0.0, math.inf, -math.inf, math.nan]),
)


def lane_of(width: int) -> RowLane:
    names = [f"f{j}" for j in range(width)]
    lane = row_lane(names, True, tuple(names), None, None)
    assert lane is not None
    return lane


@settings(max_examples=3000, deadline=None)
@given(cells=st.lists(CELLS, min_size=1, max_size=6))
def test_record_cells_takes_what_the_numpy_rule_took(cells: list[Any]) -> None:
    lane = lane_of(len(cells))
    record = {f"f{j}": cell for j, cell in enumerate(cells)}
    found = record_cells(lane, [record], None)
    assert (found is not None) == numpy_rule(tuple(cells))
    if found is not None:
        assert np.array(found, dtype=np.float64).tobytes() == np.array(cells, np.float64).tobytes()


def within_float32() -> st.SearchStrategy[Any]:
    """Cells a lone record or a checked Arrow row may hold: finite, within float32's range."""
    return st.one_of(
        st.floats(-FLOAT32_MAX, FLOAT32_MAX, allow_nan=False),
        st.floats(-1e-36, 1e-36, allow_nan=False),  # float32 subnormals and their neighbours
        st.integers(-(2**53) + 1, 2**53 - 1),
        st.sampled_from([0.0, -0.0, FLOAT32_MAX, -FLOAT32_MAX, 1e-45, 2**24 + 1, 16777217.0]),
    )


def array_way(engine: CompiledModel, cells: tuple[Any, ...]) -> np.ndarray[Any, Any]:
    """GTIL's output for the row cast as ``_checked_margins`` casts it."""
    X = np.array([cells], dtype=np.float64).astype(np.float32).astype(np.float64)
    assert _PREDICT_WITH_CONFIG is not None
    out = predict_direct(engine.model, X, _CONFIGS[engine.plan.margin], _PREDICT_WITH_CONFIG)
    return np.asarray(out, dtype=np.float64).reshape(-1)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(["forest", "binary_forest", "binary_boosting"]))
def test_gtil_given_the_cells_scores_what_it_scores_given_the_cast_row(
    data: st.DataObject, kind: str
) -> None:
    engine = engine_of(kind)
    width = engine.model.num_feature
    cells = tuple(data.draw(st.lists(within_float32(), min_size=width, max_size=width)))
    found = predict_cells(engine.model, cells, _CONFIGS[engine.plan.margin])
    assert found is not None
    assert np.array(found, dtype=np.float64).tobytes() == array_way(engine, cells).tobytes()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(COMPILED))
def test_cells_class_is_row_class(data: st.DataObject, kind: str) -> None:
    engine = engine_of(kind)
    width = engine.model.num_feature
    cells = tuple(data.draw(st.lists(within_float32(), min_size=width, max_size=width)))
    found = engine.cells_class(cells)
    want = engine.row_class(np.array([cells], dtype=np.float64))
    if found is None:  # declined: another plan (softmax, LightGBM's own predictor) or a tie
        assert kind in ("boosting", "lightgbm") or want is None
        return
    assert want is not None
    assert found[0] == want[0]
    proba = np.array([found[1]], dtype=np.float64)
    assert proba.shape == want[1].shape
    assert proba.tobytes() == np.asarray(want[1], dtype=np.float64).tobytes()


@pytest.mark.parametrize("kind", ["forest", "binary_forest", "binary_boosting"])
def test_the_cells_lane_covers_the_forest_and_binary_boosting(kind: str) -> None:
    engine = engine_of(kind)
    cells = tuple([1.25] * engine.model.num_feature)
    assert engine.cells_class(cells) is not None


@pytest.mark.parametrize("kind", ["forest", "binary_boosting"])
def test_a_lone_record_is_answered_from_its_cells(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lane asks ``cells_class``, not ``row_class`` (the row's arrays are not made)."""
    server = servable(kind)
    record = dict.fromkeys(server.signature.feature_names, 1.25)
    options = PredictOptions(return_proba=True)
    want = server.predict_record([record], options, None)
    assert want is not None

    def refused(self: CompiledModel, X: Any) -> None:
        raise AssertionError("row_class was asked")

    monkeypatch.setattr(CompiledModel, "row_class", refused)
    found = server.predict_record([record], options, None)
    assert found is not None
    assert found[0].predictions == want[0].predictions
    assert found[0].probabilities is not None and want[0].probabilities is not None
    assert found[0].probabilities.tobytes() == want[0].probabilities.tobytes()


ROW_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(0, 2**64 - 1).map(lambda bits: float(np.uint64(bits).view(np.float64))),
    st.sampled_from([FLOAT32_MAX, -FLOAT32_MAX, np.nextafter(FLOAT32_MAX, np.inf), -0.0]),
)


@settings(max_examples=3000, deadline=None)
@given(row=st.lists(ROW_VALUES, min_size=1, max_size=40))
def test_one_row_s_float32_bound_is_numpy_s(row: list[float]) -> None:
    """A one-row matrix's bound, held on its Python floats, is ``np.abs(m).max() <= L``."""
    from ensembles.inference.cells import FLOAT32_LIMIT
    from ensembles.inference.small_tables import _within_float32

    matrix = np.array([row], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        want = bool(np.abs(matrix).max() <= FLOAT32_LIMIT)
    assert _within_float32(matrix) == want


@pytest.mark.parametrize("kind", ["forest", "binary_boosting"])
def test_a_lone_arrow_row_is_answered_from_its_cells(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``predict_row`` (a checked one-row Arrow body) asks ``cells_class`` too, and gets
    ``row_class``'s answer."""
    server = servable(kind)
    names = tuple(server.signature.feature_names)
    row = np.full((1, len(names)), 1.25)
    options = PredictOptions(return_proba=True)
    engine = engine_of(kind)
    want = engine.row_class(row)
    assert want is not None

    def refused(self: CompiledModel, X: Any) -> None:
        raise AssertionError("row_class was asked")

    monkeypatch.setattr(CompiledModel, "row_class", refused)
    found = server.predict_row(names, row, options)
    assert found is not None
    assert found.probabilities is not None
    assert found.probabilities.tobytes() == np.asarray(want[1], np.float64).tobytes()
