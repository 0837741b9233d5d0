"""The lane of lone records (``Servable.predict_record``, ``ensembles.inference.one_row``)
answers exactly what checking the record (``check_rows``) and predicting its columns
(``Servable.predict``) answers, bit for bit, or declines (None) and leaves it to them:
over random records (good numbers, NaN, infinities, -0.0, huge ints, bools, strings,
missing and extra columns), every option a request may ask, and every kind of
``test_batches.KINDS`` (forest, gradient boosting, voting, regression, LightGBM).  Its
one-row label rule (``gtil.decide_row``) is ``gtil.decide``'s on random scores, ties,
near-ties, -0.0, infinities and NaN."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ensembles.errors import EnsembleError
from ensembles.inference import CompiledModel, Prediction, PredictOptions, check_rows, compiled
from ensembles.inference.gtil import TIE_MARGIN, Plan, decide, decide_row
from ensembles.inference.one_row import record_row
from tests.unit.inference import test_batches
from tests.unit.inference.test_batches import KINDS, servable
from tests.unit.inference.test_lone_record import lone_records

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
# Beside test_batches' kinds: the other plans of the compiled engine (XGBoost's float32
# sums, histogram boosting's float64 rows and softmax, extra trees, stacking's members).
MORE: dict[str, tuple[str, dict[str, Any], list[PredictOptions]]] = {
    "xgboost": ("breast_cancer", {"kind": "xgboost", "params": {"n_estimators": 12}}, []),
    "histogram": ("wine", {"kind": "hist_gradient_boosting", "params": {"max_iter": 12}}, []),
    "extra_trees": ("iris", {"kind": "extra_trees", "params": {"n_estimators": 10}}, []),
    "stacking": (
        "iris",
        {"kind": "stacking", "params": {"cv": 3}, "estimators": test_batches.MEMBERS[1:]},
        [],
    ),
}
ALL_KINDS = sorted([*KINDS, *MORE])


@pytest.fixture(autouse=True, scope="module")
def _more_kinds() -> Any:
    """test_batches' ``servable`` builds these kinds too (its KINDS table, extended)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(test_batches, "KINDS", {**KINDS, **MORE})
        yield


OPTIONS = [
    PredictOptions(),
    PredictOptions(return_proba=True),
    PredictOptions(return_votes=True),
    PredictOptions(return_std=True),
    PredictOptions(voting="soft", return_proba=True),
    PredictOptions(voting="hard"),
]


def general(kind: str, record: object, options: PredictOptions) -> Any:
    """What the request gets the general way: (prediction, warnings), or the error."""
    server = servable(kind)
    try:
        checked = check_rows(server.signature, [record])
        return server.predict(checked.columns, options), checked.warnings
    except (EnsembleError, ValueError) as exc:
        return exc


def assert_bits(got: Prediction, want: Prediction) -> None:
    """Equal labels; float arrays of the same dtype, shape, layout and bytes."""
    if isinstance(want.predictions, list):
        assert got.predictions == want.predictions
        assert [type(x) for x in got.predictions] == [type(x) for x in want.predictions]
    else:
        assert isinstance(got.predictions, np.ndarray)
        assert got.predictions.dtype == want.predictions.dtype
        assert got.predictions.tobytes() == want.predictions.tobytes()
    for name in ("probabilities", "agreement", "std"):
        a, b = getattr(got, name), getattr(want, name)
        assert (a is None) == (b is None), name
        if b is not None:
            assert a.dtype == b.dtype and a.shape == b.shape, name
            assert a.flags.c_contiguous, name  # what orjson writes
            assert a.tobytes() == b.tobytes(), name
    assert got.votes == want.votes and got.weighted_votes == want.weighted_votes
    assert got.engine == want.engine


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    kind=st.sampled_from(ALL_KINDS),
    options=st.sampled_from([*OPTIONS[:2] * 4, *OPTIONS]),  # mostly those the lane takes
)
def test_the_lane_answers_a_lone_record_as_check_and_predict_do(
    data: st.DataObject, kind: str, options: PredictOptions
) -> None:
    server = servable(kind)
    names = tuple(server.signature.feature_names)
    record = data.draw(lone_records(names))
    lane = server.predict_record([record], options, None)
    event(f"{kind}: {'lane' if lane is not None else 'declined'}")
    if lane is None:
        return
    want = general(kind, record, options)
    assert not isinstance(want, Exception), want
    assert lane[1] == want[1] == []
    assert_bits(lane[0], want[0])


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_good_records_take_the_lane(kind: str) -> None:
    """Plain rows of a passthrough model are the lane's (else it would test nothing)."""
    server = servable(kind)
    names = server.signature.feature_names
    record = dict.fromkeys(names, 1.25)
    found = server.predict_record([record], PredictOptions(return_proba=False), None)
    assert (found is not None) == (server.passthrough == tuple(names))
    if found is not None:
        want = general(kind, record, PredictOptions())
        assert_bits(found[0], want[0])


def test_the_lane_declines_what_the_general_way_refuses_or_warns_about() -> None:
    server = servable("forest")
    names = server.signature.feature_names
    good = dict.fromkeys(names, 1.0)
    proba = PredictOptions(return_proba=True)
    assert server.predict_record([good], proba, None) is not None
    assert server.predict_record([good], proba, 0) is None  # the row limit: a 413
    assert server.predict_record([good, good], proba, None) is None  # two rows
    assert server.predict_record([{**good, "x": 1.0}], proba, None) is None  # a warning
    assert server.predict_record([{**good, names[0]: True}], proba, None) is None
    assert server.predict_record([{**good, names[0]: float("nan")}], proba, None) is None
    assert server.predict_record([{**good, names[0]: 2**53}], proba, None) is None
    assert server.predict_record([{**good, names[0]: 10**400}], proba, None) is None
    assert server.predict_record([good], PredictOptions(return_votes=True), None) is None
    regressor = servable("regressor")
    record = dict.fromkeys(regressor.signature.feature_names, 0.5)
    assert regressor.predict_record([record], proba, None) is None  # its 422


def test_a_row_too_close_to_call_is_left_to_the_general_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``row_class`` and ``cells_class`` decline a tie; the lane then takes the engine's
    general answer (whose label comes from scikit-learn), the same as ``predict``'s."""
    server = servable("forest")
    engine = server.engine_for(1)
    assert isinstance(engine, CompiledModel)
    record = dict.fromkeys(server.signature.feature_names, 1.0)
    tied = np.array([[0.5, 0.5, 0.0]])
    monkeypatch.setattr(CompiledModel, "_margins", lambda self, X: tied)
    monkeypatch.setattr(CompiledModel, "_checked_margins", lambda self, X: tied)
    monkeypatch.setattr(compiled, "gtil_cells", lambda model, cells, plan: tied[0].tolist())
    X = np.ones((1, len(record)))
    assert engine.row_class(X) is None
    assert engine.cells_class(tuple(X[0].tolist())) is None
    found = server.predict_record([record], PredictOptions(return_proba=True), None)
    assert found is not None
    want = general("forest", record, PredictOptions(return_proba=True))
    assert_bits(found[0], want[0])


SCORES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([0.0, -0.0, 0.5, 1.0, TIE_MARGIN, -TIE_MARGIN, 1.0 + TIE_MARGIN]),
)


@st.composite
def score_rows(draw: st.DrawFn) -> list[float]:
    """Rows of 1 to 5 scores, often with ties and near-ties."""
    k = draw(st.integers(1, 5))
    row = draw(st.lists(SCORES, min_size=k, max_size=k))
    if k > 1 and draw(st.booleans()):  # a tie or a near-tie of two columns
        i, j = draw(st.permutations(range(k)))[:2]
        row[j] = row[i] + draw(st.sampled_from([0.0, 0.0, TIE_MARGIN / 2, -TIE_MARGIN, 2e-9]))
    return row


@settings(max_examples=3000, deadline=None)
@given(row=score_rows(), decision=st.sampled_from(["proba", "raw_argmax", "raw_ge", "raw_gt"]))
def test_one_row_decision_is_decide_s(row: list[float], decision: str) -> None:
    plan = Plan(True, False, "identity", decision)  # type: ignore[arg-type]
    if decision in ("raw_ge", "raw_gt"):
        row = row[:1]
    with np.errstate(invalid="ignore", over="ignore"):
        index, ambiguous = decide(np.array([row], dtype=np.float64), plan)
    found = decide_row(list(row), plan)
    if found is None:  # too close to call, or a NaN: the general way decides
        event("declined")
        assert bool(ambiguous[0]) or any(x != x for x in row)
        return
    assert not ambiguous[0]
    assert found == int(index[0])


BIG = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.floats(2.0**49, 2.0**54).map(lambda v: v * (1 if int(v) % 2 else -1)),
    st.integers(2**49, 2**54).map(lambda v: v if v % 3 else -v),
    st.sampled_from([2.0**53, -(2.0**53), 2**53 - 1, -(2**53) + 1, 2**53, 1e154, 1e155]),
)


@settings(max_examples=1500, deadline=None)
@given(cells=st.lists(BIG, min_size=4, max_size=4))
def test_a_row_the_lane_takes_is_one_check_rows_takes_with_the_same_bits(
    cells: list[Any],
) -> None:
    """The lane takes no row that ``check_rows``' fast path refuses (a value of 2**53
    or more, NaN, an infinity), and the row it makes is that path's, to the bit."""
    server = servable("forest")
    names = server.signature.feature_names
    record = dict(zip(names, cells, strict=True))
    server.predict_record([record], PredictOptions(), None)  # (the lane made)
    lane = server._lane[0]
    assert lane is not None
    row = record_row(lane, [record], None)
    event("taken" if row is not None else "declined")
    if row is None:
        return
    assert all(abs(float(v)) < 2**53 for v in cells)
    checked = check_rows(server.signature, [record])
    matrix = checked.columns.matrix  # type: ignore[attr-defined]
    assert row.dtype == matrix.dtype and row.shape == matrix.shape and row.flags.c_contiguous
    assert row.tobytes() == matrix.tobytes()


def test_a_servable_pickles_with_its_lane() -> None:
    server = servable("forest")
    record = dict.fromkeys(server.signature.feature_names, 1.0)
    assert server.predict_record([record], PredictOptions(), None) is not None
    again = pickle.loads(pickle.dumps(server))
    found = again.predict_record([record], PredictOptions(), None)
    assert found is not None
    assert_bits(found[0], server.predict_record([record], PredictOptions(), None)[0])  # type: ignore[index]
