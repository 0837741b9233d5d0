"""Batches: requests joined into one engine call and split back get, row for row, the very
answers they get alone (labels, probabilities, votes, weighted votes, agreement, std, the
engine), for random mixes of request sizes, options and kinds."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ensembles.errors import PredictionInputError
from ensembles.inference import (
    Columns,
    Prediction,
    PredictOptions,
    Servable,
    check_rows,
    inference_verdict,
    prepare,
)
from ensembles.inference.batches import (
    batch_key,
    batchable,
    concat_columns,
    row_count,
    split_prediction,
)
from ensembles.inference.cells import MatrixColumns
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import frame, training_data

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
NO_EVAL = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
MEMBERS = [
    {"name": "lr", "kind": "logistic_regression"},
    {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
    {"name": "nb", "kind": "gaussian_nb"},
]
# name: (dataset, spec, the options a request may ask for)
KINDS: dict[str, tuple[str, dict[str, Any], list[PredictOptions]]] = {
    "forest": (
        "iris",
        {"kind": "random_forest", "params": {"n_estimators": 10}},
        [PredictOptions(), PredictOptions(return_proba=True), PredictOptions(return_votes=True)],
    ),
    "boosting": (
        "wine",
        {"kind": "gradient_boosting", "params": {"n_estimators": 10}},
        [PredictOptions(), PredictOptions(return_proba=True)],
    ),
    "hard_voting": (
        "iris",
        {"kind": "voting", "params": {"voting": "hard"}, "estimators": MEMBERS},
        [
            PredictOptions(return_votes=True),
            PredictOptions(return_votes=True, return_proba=True),
            PredictOptions(voting="soft", return_proba=True),
        ],
    ),
    "weighted_voting": (
        "iris",
        {
            "kind": "voting",
            "params": {"voting": "soft", "weights": [1, 2, 3]},
            "estimators": MEMBERS,
        },
        [PredictOptions(return_votes=True, return_proba=True), PredictOptions(voting="hard")],
    ),
    "regressor": (
        "diabetes",
        {"kind": "random_forest", "params": {"n_estimators": 10}},
        [PredictOptions(), PredictOptions(return_std=True)],
    ),
    # One row by LightGBM's own predictor, more by GTIL (ensembles.inference.lightgbm_row).
    "lightgbm": (
        "breast_cancer",
        {"kind": "lightgbm", "params": {"n_estimators": 20}},
        [PredictOptions(), PredictOptions(return_proba=True)],
    ),
}


@cache
def servable(kind: str) -> Servable:
    """The kind's model as the service serves it: with its compiled engine when it has one."""
    name, spec, _ = KINDS[kind]
    data = training_data(name)
    model = train(data, resolve_ensemble(parse_estimator_spec(spec), data.task), NO_EVAL, 3)
    recorded = inference_verdict(model.pipeline, model.signature.task, model.train_rows, 3)
    return prepare(model.pipeline, model.signature, recorded)


def request_columns(kind: str, rows: list[int]) -> Columns:
    """Checked columns of the dataset's rows ``rows``, as a request's rows become."""
    name = KINDS[kind][0]
    features = frame(name).drop(columns="target")
    records = features.iloc[rows].to_dict(orient="records")
    return check_rows(servable(kind).signature, records).columns


def assert_same(batched: Prediction, alone: Prediction) -> None:
    """Value for value: labels and tallies equal, every float array equal to the bit."""
    if isinstance(alone.predictions, list):
        assert batched.predictions == alone.predictions
    else:
        assert np.array_equal(batched.predictions, alone.predictions)
    for name in ("probabilities", "agreement", "std"):
        got, want = getattr(batched, name), getattr(alone, name)
        assert (got is None) == (want is None), name
        if want is not None:
            assert got.flags.c_contiguous, name  # what orjson writes
            assert np.array_equal(got, want), name
    assert batched.votes == alone.votes
    assert batched.weighted_votes == alone.weighted_votes
    assert batched.engine == alone.engine


def answered_together(server: Servable, parts: list[Columns], options: PredictOptions) -> None:
    try:
        joined = server.predict(concat_columns(parts), options)
    except PredictionInputError as exc:  # options this model cannot honour: each alone too
        for part in parts:
            with pytest.raises(PredictionInputError) as alone:
                server.predict(part, options)
            assert alone.value.problems == exc.problems
        return
    pieces = split_prediction(joined, [row_count(p) for p in parts])
    assert len(pieces) == len(parts)
    for piece, part in zip(pieces, parts, strict=True):
        assert_same(piece, server.predict(part, options))


REQUESTS = st.lists(
    st.tuples(
        st.lists(st.integers(0, 149), min_size=1, max_size=6),  # the request's rows
        st.integers(0, 2),  # which of the kind's options
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(KINDS)), requests=REQUESTS)
def test_batched_answers_equal_unbatched_ones(kind: str, requests: list[Any]) -> None:
    """A random mix of requests, grouped as the service groups them (batch_key), each
    batch answered by one call and split back."""
    server = servable(kind)
    choices = KINDS[kind][2]
    groups: dict[Any, tuple[PredictOptions, list[Columns]]] = {}
    for rows, which in requests:
        options = choices[which % len(choices)]
        columns = request_columns(kind, rows)
        groups.setdefault(batch_key(columns, options), (options, []))[1].append(columns)
    for options, parts in groups.values():
        if batchable(server, sum(map(row_count, parts)), options):
            answered_together(server, parts, options)
        else:  # answers summed over rows by numpy: never joined (see the next test)
            assert options.voting or options.return_std or kind not in JOINED


JOINED = ("forest", "boosting", "regressor", "lightgbm")  # compiled tree ensembles


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_only_answers_computed_row_by_row_are_joined(kind: str) -> None:
    """Compiled tree ensembles are; numpy's sums over members (a soft vote, linear members,
    std) are not, and they would differ: joined, some rows' answers move by an ulp."""
    server = servable(kind)
    parts = [request_columns(kind, [i]) for i in range(0, 60, 5)]
    for options in KINDS[kind][2]:
        joinable = batchable(server, len(parts), options)
        assert joinable == (kind in JOINED and not options.voting and not options.return_std)
        if joinable:
            answered_together(server, parts, options)


def test_the_engine_that_answers_a_batch_is_the_one_each_request_gets() -> None:
    """The batch is small enough for the compiled engine, as each request alone is."""
    server = servable("forest")
    parts = [request_columns("forest", [i, i + 1]) for i in range(0, 20, 2)]
    answer = server.predict(concat_columns(parts), PredictOptions())
    assert answer.engine == server.predict(parts[0], PredictOptions()).engine != "scikit-learn"


def test_columns_of_other_dtypes_are_not_joined() -> None:
    """An integer column kept as int64 (the careful path) and a float64 one of the same
    feature have different keys: joined, the int64 would become float64."""
    as_float = {"x": np.array([1.0, 2.0])}
    as_int = {"x": np.array([2**60], dtype=np.int64)}
    assert batch_key(as_float, PredictOptions()) != batch_key(as_int, PredictOptions())
    assert batch_key(as_float, PredictOptions()) != batch_key(
        as_float, PredictOptions(return_proba=True)
    )
    assert batch_key(as_float, PredictOptions()) == batch_key(
        {"x": np.array([3.0])}, PredictOptions()
    )


def test_split_keeps_each_requests_rows_in_order() -> None:
    prediction = Prediction(
        predictions=["a", "b", "c", "d"],
        probabilities=np.arange(8, dtype=np.float64).reshape(4, 2),
        votes=[{"a": 1}, {"b": 1}, {"c": 1}, {"d": 1}],
        agreement=np.array([1.0, 0.5, 0.25, 0.0]),
        engine="x",
    )
    first, second = split_prediction(prediction, [1, 3])
    assert first.predictions == ["a"] and second.predictions == ["b", "c", "d"]
    assert first.probabilities is not None and second.probabilities is not None
    assert first.probabilities.tolist() == [[0.0, 1.0]]
    assert second.probabilities.tolist() == [[2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
    assert second.votes == [{"b": 1}, {"c": 1}, {"d": 1}]
    assert second.agreement is not None and second.agreement.tolist() == [0.5, 0.25, 0.0]
    assert first.std is None and second.engine == "x"


def test_concatenated_columns_keep_their_order_and_dtypes() -> None:
    parts = [
        {"x": np.array([1.0]), "c": np.array(["a"], dtype=object)},
        {"x": np.array([2.0, 3.0]), "c": np.array(["b", None], dtype=object)},
    ]
    joined = concat_columns(parts)
    assert joined["x"].tolist() == [1.0, 2.0, 3.0] and joined["x"].dtype == np.float64
    assert joined["c"].tolist() == ["a", "b", None]
    assert row_count(joined) == 3
    assert pd.Series(joined["c"]).isna().sum() == 1


def test_tables_of_records_are_joined_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests' records read into one table each are joined table by table (one
    concatenation for the batch, not one per column), to the columns joined one by one;
    a part whose columns were changed is joined column by column again."""
    parts = [request_columns("forest", rows) for rows in ([0], [5, 9], [100])]
    names = list(parts[0])
    expected = {n: np.concatenate([p[n] for p in parts]) for n in names}
    calls: list[int] = []
    concatenate = np.concatenate
    monkeypatch.setattr(np, "concatenate", lambda *a, **k: calls.append(1) or concatenate(*a, **k))
    joined = concat_columns(parts)
    assert calls == [1]
    assert list(joined) == names and row_count(joined) == 4
    for name in names:
        np.testing.assert_array_equal(joined[name], expected[name], strict=True)
    server = servable("forest")
    options = PredictOptions(return_proba=True)
    whole = server.predict(joined, options)
    assert_same(whole, server.predict(expected, options))
    parts[1][names[0]] = parts[1][names[0]] + 0.0  # no longer its table's column
    calls.clear()
    concat_columns(parts)
    assert len(calls) == len(names)


def test_the_key_of_one_matrix_s_columns_is_read_without_a_pass_over_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The columns of a table of records (:class:`MatrixColumns`) get the key of the same
    columns as a dict, from their names and the matrix's dtype (a pass over 30 columns
    cost a one-row request 2 us): the same batches as before."""
    matrix = np.arange(6, dtype=np.float64).reshape(2, 3)
    columns = MatrixColumns(["a", "b", "c"], matrix)
    as_dict = {name: matrix[:, j].copy() for j, name in enumerate("abc")}
    expected = batch_key(as_dict, PredictOptions(return_proba=True))

    def refused(self: Any) -> Any:
        raise AssertionError("the columns were read one by one")

    monkeypatch.setattr(MatrixColumns, "values", refused)
    assert batch_key(columns, PredictOptions(return_proba=True)) == expected
    monkeypatch.undo()
    columns["c"] = np.array([1, 2])  # changed: no matrix any more, the dict's own key
    key = batch_key(columns, PredictOptions(return_proba=True))
    assert key != expected and key[2][-1] == np.array([1, 2]).dtype


def test_split_parts_are_the_predictions_their_init_makes() -> None:
    """Parts are made without ``Prediction.__init__`` (one-row batches: the frozen
    dataclass's seven ``object.__setattr__`` calls per part): each is still a frozen
    Prediction whose fields are those ``__init__`` sets."""
    from dataclasses import FrozenInstanceError, fields

    from ensembles.inference.batches import _MADE_PLAINLY

    assert _MADE_PLAINLY  # else the parts are made by __init__, as before
    probabilities = np.arange(8.0).reshape(4, 2)
    joined = Prediction(["a", "b", "a", "b"], probabilities=probabilities, engine="x")
    parts = split_prediction(joined, [1, 2, 1])
    for part, (start, end) in zip(parts, [(0, 1), (1, 3), (3, 4)], strict=True):
        assert type(part) is Prediction
        values = {f.name: getattr(part, f.name) for f in fields(Prediction)}
        assert vars(part) == vars(Prediction(**values))
        assert part.predictions == joined.predictions[start:end]
        assert part.probabilities is not None and part.probabilities.flags.c_contiguous
        assert part.probabilities.tobytes() == probabilities[start:end].tobytes()
        assert (part.votes, part.std, part.engine) == (None, None, "x")
        with pytest.raises(FrozenInstanceError):
            part.engine = "y"  # type: ignore[misc]


def test_rows_left_one_matrix_join_as_the_columns_of_their_matrices() -> None:
    """Checked rows not yet made columns (:class:`MatrixRows`, a one-row Arrow body's)
    have the key, the row count and the joined columns of their matrix's columns
    (:class:`MatrixColumns`), mixed with those or alone; with other columns they are
    made columns first.  The joined values are the same float64 bits."""
    from ensembles.inference.batches import as_columns, row_count
    from ensembles.inference.cells import MatrixRows

    names = ("a", "b", "c")
    first = np.array([[-0.0, 5e-324, 1.5]])
    second = np.array([[2.0, -3.25, 1e300], [4.0, 5.0, 6.0]])
    rows = MatrixRows(names, first)
    options = PredictOptions(return_proba=True)
    assert batch_key(rows, options) == batch_key(MatrixColumns(names, first), options)
    assert row_count(rows) == 1 and row_count(MatrixRows(names, second)) == 2
    alone = as_columns(rows)
    assert type(alone) is MatrixColumns and alone.names == names and alone.matrix is first
    expected = np.vstack([first, second])
    mixes: list[list[Columns | MatrixRows]] = [
        [rows, MatrixRows(names, second)],
        [rows, MatrixColumns(names, second)],
        [rows, {n: second[:, j].copy() for j, n in enumerate(names)}],
    ]
    for parts in mixes:
        joined = concat_columns(parts)
        assert list(joined) == list(names)
        for j, name in enumerate(names):
            assert np.array_equal(joined[name].view(np.int64), expected[:, j].view(np.int64))
    whole = concat_columns([rows, MatrixRows(names, second)])
    assert type(whole) is MatrixColumns and whole.matrix is not None
    assert np.array_equal(whole.matrix.view(np.int64), expected.view(np.int64))
    assert type(concat_columns([rows])) is MatrixColumns
