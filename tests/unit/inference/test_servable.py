"""The serving path: the same answers as the stored Pipeline, from less work.

* rows of all-numeric models go straight into float64 arrays (no DataFrame), giving
  exactly what the careful path gives, and anything unusual takes the careful path;
* a Servable answers exactly as the Pipeline (scikit-learn) or within 1e-9 (compiled),
  preprocessing by stacking columns only where that equals the ColumnTransformer;
* the engine verdict is made after training (``inference_verdict``, as the worker does);
  training uses every core without changing the model and leaves ``n_jobs`` unset in the
  stored model.
"""

from __future__ import annotations

import pickle
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from ensembles.builders import FeatureColumn, build_pipeline
from ensembles.data import select_training_data, table_from_frame
from ensembles.errors import PredictionInputError
from ensembles.inference import (
    ENGINE,
    SKLEARN,
    CompiledModel,
    PredictOptions,
    check_rows,
    inference_verdict,
    prepare,
    rows,
)
from ensembles.inference import servable as servable_module
from ensembles.inference.servable import stack_columns
from ensembles.inference.votes import label_positions
from ensembles.members import members_of
from ensembles.parallel import MemberPool, members_in_parallel
from ensembles.signature import ModelSignature
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import frame, training_data

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
NO_EVAL = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
MEMBERS = [
    {"name": "lr", "kind": "logistic_regression"},
    {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
    {"name": "nb", "kind": "gaussian_nb"},
]
SPECS: dict[str, dict[str, Any]] = {
    "random_forest": {"kind": "random_forest", "params": {"n_estimators": 10}},
    "extra_trees": {"kind": "extra_trees", "params": {"n_estimators": 10}},
    "gradient_boosting": {"kind": "gradient_boosting", "params": {"n_estimators": 10}},
    "bagging": {"kind": "bagging", "params": {"n_estimators": 5}},
    "soft_voting": {"kind": "voting", "params": {"voting": "soft"}, "estimators": MEMBERS},
    "hard_voting": {"kind": "voting", "params": {"voting": "hard"}, "estimators": MEMBERS},
    "stacking": {"kind": "stacking", "params": {"cv": 3}, "estimators": MEMBERS},
}


@cache
def fitted(kind: str, name: str = "iris") -> FittedModel:
    data = training_data(name)
    spec = resolve_ensemble(parse_estimator_spec(SPECS[kind]), data.task)
    return train(data, spec, NO_EVAL, 3)


@cache
def verdict(kind: str, name: str = "iris") -> dict[str, Any]:
    """The version's ``inference`` metadata, as the worker records it after training."""
    model = fitted(kind, name)
    return inference_verdict(model.pipeline, model.signature.task, model.train_rows, 3)


def sample(name: str = "iris", n: int = 40) -> pd.DataFrame:
    table = frame(name).drop(columns="target")
    return table.sample(n, random_state=1, replace=True).reset_index(drop=True)


# --- rows in ----------------------------------------------------------------------------


def careful(
    monkeypatch: pytest.MonkeyPatch, signature: ModelSignature, instances: object
) -> tuple[dict[str, Any], list[str]]:
    with monkeypatch.context() as m:
        m.setattr(rows, "_numeric_columns", lambda *_: None)
        return check_rows(signature, instances)


def _records_with_extra(X: pd.DataFrame) -> list[dict[str, Any]]:
    return [{**r, "note": "x"} for r in X.to_dict(orient="records")]


@pytest.mark.parametrize(
    "shape", ["records", "columnar", "columnar_shuffled", "records_extra", "ints"]
)
def test_numeric_rows_take_the_fast_path_to_the_same_arrays(
    monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    signature = fitted("random_forest").signature
    X = sample()
    columns = list(X.columns)
    instances: object = {
        "records": lambda: X.to_dict(orient="records"),
        "columnar": lambda: {"columns": columns, "data": X.to_numpy().tolist()},
        "columnar_shuffled": lambda: {
            "columns": [*columns[::-1], "extra"],
            "data": [[*r[::-1], 1] for r in X.to_numpy().tolist()],
        },
        "records_extra": lambda: _records_with_extra(X),
        "ints": lambda: [{c: int(v * 10) for c, v in r.items()} for r in X.to_dict("records")],
    }[shape]()
    assert rows._numeric_columns(signature, instances, None) is not None
    fast, fast_warnings = check_rows(signature, instances)
    slow, slow_warnings = careful(monkeypatch, signature, instances)
    assert list(fast) == list(slow) == [f.name for f in signature.features]
    for name in fast:
        assert fast[name].dtype == np.float64
        np.testing.assert_array_equal(fast[name], slow[name].astype(np.float64), strict=True)
    assert fast_warnings == slow_warnings


@pytest.mark.parametrize(
    "cell", [True, "1.5", None, float("nan"), float("inf"), 2**53 + 1, 10**400, [1.0]]
)
def test_unusual_cells_take_the_careful_path(cell: object) -> None:
    signature = fitted("random_forest").signature
    records = sample(n=3).to_dict(orient="records")
    records[1]["sepal width (cm)"] = cell
    assert rows._numeric_columns(signature, records, None) is None
    columnar = {"columns": list(records[0]), "data": [list(r.values()) for r in records]}
    assert rows._numeric_columns(signature, columnar, None) is None


def test_malformed_input_takes_the_careful_path() -> None:
    signature = fitted("random_forest").signature
    good = sample(n=2).to_dict(orient="records")
    header = list(good[0])
    for instances in (
        [],
        [good[0], "row"],
        [{k: v for k, v in good[0].items() if k != "petal width (cm)"}],
        {"columns": header, "data": [list(good[0].values())[:-1]]},
        {"columns": [*header[:-1], header[0]], "data": [list(good[0].values())]},
        {"columns": header, "data": "rows"},
    ):
        assert rows._numeric_columns(signature, instances, None) is None
    assert rows._numeric_columns(signature, good, max_rows=1) is None  # 413 there


def test_mixed_tables_keep_the_careful_path_and_the_column_transformer() -> None:
    table = frame("iris").assign(colour=np.where(np.arange(150) % 2 == 0, "red", "blue"))
    data = select_training_data(table_from_frame(table), "target")
    spec = resolve_ensemble(parse_estimator_spec(SPECS["random_forest"]), data.task)
    model = train(data, spec, NO_EVAL, 3)
    instances = data.X.head(5).to_dict(orient="records")
    assert rows._numeric_columns(model.signature, instances, None) is None
    columns, _ = check_rows(model.signature, instances)
    inference = inference_verdict(model.pipeline, data.task, model.train_rows, 3)
    servable = prepare(model.pipeline, model.signature, inference)
    assert servable.passthrough is None
    answer = servable.answer(columns, with_proba=True)
    np.testing.assert_array_equal(answer.predictions, model.pipeline.predict(data.X.head(5)))
    expected = model.pipeline.predict_proba(data.X.head(5))
    np.testing.assert_allclose(answer.probabilities, expected, rtol=0, atol=1e-9)
    assert list(columns) == list(data.X.columns)


# --- answers out ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(SPECS))
def test_a_servable_answers_as_the_pipeline(kind: str) -> None:
    model = fitted(kind)
    pipeline: Pipeline = model.pipeline
    servable = prepare(pipeline, model.signature, verdict(kind))
    X = sample(n=300)
    assert servable.passthrough == tuple(X.columns)  # a table of numbers: no DataFrame needed
    columns = {c: X[c].to_numpy() for c in X.columns}
    for size in (1, 7, 300):
        part = {c: v[:size] for c, v in columns.items()}
        answer = servable.answer(part, with_proba=True)
        expected_labels = pipeline.predict(X.head(size))
        np.testing.assert_array_equal(answer.predictions, expected_labels)
        if not hasattr(pipeline, "predict_proba"):  # hard voting
            assert answer.probabilities is None
            continue
        expected = pipeline.predict_proba(X.head(size))
        assert answer.probabilities is not None
        if answer.engine == SKLEARN:
            np.testing.assert_array_equal(answer.probabilities, expected)
        else:
            np.testing.assert_allclose(answer.probabilities, expected, rtol=0, atol=1e-9)


@pytest.mark.parametrize("kind", ["random_forest", "soft_voting", "stacking"])
def test_predict_with_a_servable_equals_predict_with_the_pipeline(kind: str) -> None:
    model = fitted(kind)
    inference = verdict(kind)
    servable = prepare(model.pipeline, model.signature, inference)
    X = sample(n=25)
    columns = {c: X[c].to_numpy() for c in X.columns}
    options = PredictOptions(return_proba=True)
    by_pipeline = prepare(model.pipeline, model.signature, None).predict(X, options)
    by_servable = servable.predict(columns, options)
    assert by_servable.predictions == by_pipeline.predictions
    np.testing.assert_allclose(
        by_servable.probabilities, by_pipeline.probabilities, rtol=0, atol=1e-9
    )
    assert by_servable.engine == (ENGINE if inference["ok"] else SKLEARN)


def test_columnar_rows_in_the_models_order_are_read_as_one_matrix_without_a_copy() -> None:
    model = fitted("random_forest")
    servable = prepare(model.pipeline, model.signature, None)
    X = sample(n=50)
    names = list(X.columns)
    matrix = np.ascontiguousarray(X.to_numpy(dtype=np.float64))  # as JSON rows read
    checked, _ = check_rows(model.signature, {"columns": names, "data": matrix})
    Xt = servable.transform(checked)
    assert np.shares_memory(Xt, matrix) and not Xt.flags.writeable
    np.testing.assert_array_equal(Xt, matrix, strict=True)
    reversed_rows = np.ascontiguousarray(matrix[:, ::-1])
    shuffled, _ = check_rows(model.signature, {"columns": names[::-1], "data": reversed_rows})
    copied = servable.transform(shuffled)  # columns in another order: stacked, as before
    assert not np.shares_memory(copied, reversed_rows)
    np.testing.assert_array_equal(copied, matrix, strict=True)
    one = servable.transform({c: matrix[:1, j] for j, c in enumerate(names)})
    np.testing.assert_array_equal(one, matrix[:1], strict=True)
    options = PredictOptions(return_proba=True)
    by_matrix = servable.predict(checked, options)
    by_frame = servable.predict(X, options)
    assert by_matrix.predictions == by_frame.predictions == model.pipeline.predict(X).tolist()
    assert list(map(type, by_matrix.predictions)) == list(map(type, by_frame.predictions))
    np.testing.assert_array_equal(by_matrix.probabilities, by_frame.probabilities)


@pytest.mark.parametrize("n_rows", [1, 2, 7, 16, 17])
def test_a_few_rows_are_copied_into_one_c_ordered_matrix(n_rows: int) -> None:
    """Up to 16 rows the columns are copied (one C call) instead of proven a view: the
    same float64 matrix, C-ordered as GTIL takes it, whatever dtype or layout they had."""
    rng = np.random.default_rng(n_rows)
    table = rng.normal(size=(4, n_rows))
    columns = {"a": table[0], "b": table[1].astype(np.float32), "c": table[2][::-1]}
    columns["d"] = rng.integers(-5, 5, n_rows)
    names = ("d", "a", "c", "b")
    stacked = stack_columns(columns, names)
    expected = np.column_stack([np.asarray(columns[c], dtype=np.float64) for c in names])
    np.testing.assert_array_equal(stacked, expected, strict=True)
    assert stacked.flags.c_contiguous


@pytest.mark.parametrize("n_rows", [1, 3, 16, 17, 40])
def test_records_checked_into_one_table_are_stacked_as_one_copy(
    monkeypatch: pytest.MonkeyPatch, n_rows: int
) -> None:
    """Records are read into one table: a model taking exactly those columns copies it,
    without concatenating the columns again, to the bits the stacking gave; any change to
    the checked columns, or another column order, stacks them as before."""
    model = fitted("random_forest")
    servable = prepare(model.pipeline, model.signature, None)
    X = sample(n=n_rows)
    names = tuple(X.columns)
    checked, _ = check_rows(model.signature, X.to_dict(orient="records"))
    assert servable.passthrough == names
    expected = np.column_stack([np.asarray(checked[c], dtype=np.float64) for c in names])
    joined: list[int] = []
    concatenate, column_stack = np.concatenate, np.column_stack
    monkeypatch.setattr(np, "concatenate", lambda *a, **k: joined.append(1) or concatenate(*a, **k))
    monkeypatch.setattr(np, "column_stack", lambda *a: joined.append(1) or column_stack(*a))
    stacked = servable.transform(checked)
    assert joined == []
    np.testing.assert_array_equal(stacked, expected, strict=True)
    assert stacked.flags.c_contiguous and stacked.flags.writeable
    assert not any(np.shares_memory(stacked, checked[c]) for c in names)
    np.testing.assert_array_equal(stack_columns(checked, names[::-1]), expected[:, ::-1])
    assert joined == [1]
    changed = np.full(n_rows, 7.0)
    checked[names[0]] = changed  # the table no longer holds these columns
    np.testing.assert_array_equal(servable.transform(checked)[:, 0], changed)
    assert pickle.loads(pickle.dumps(checked)).keys() == checked.keys()


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("gradient_boosting", "breast_cancer"),
        ("gradient_boosting", "iris"),
        ("hist_gradient_boosting", "breast_cancer"),
        ("hist_gradient_boosting", "iris"),
    ],
)
def test_boosting_served_by_sklearn_walks_its_trees_once_for_the_same_bits(
    kind: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = training_data(name)
    raw = {
        "kind": kind,
        "params": {"n_estimators" if kind == "gradient_boosting" else "max_iter": 8},
    }
    model = train(data, resolve_ensemble(parse_estimator_spec(raw), data.task), NO_EVAL, 3)
    servable = prepare(model.pipeline, model.signature, None)  # no compiled engine
    X = data.X
    expected_labels = model.pipeline.predict(X)
    expected_proba = model.pipeline.predict_proba(X)
    estimator = type(servable.pipeline[-1])
    walks: list[int] = []
    original = estimator.decision_function

    def counted(self: Any, Xt: Any) -> Any:
        walks.append(len(Xt))
        return original(self, Xt)

    monkeypatch.setattr(estimator, "decision_function", counted)
    answer = servable.answer(X, with_proba=True)
    assert answer.engine == SKLEARN and walks == [len(X)]
    np.testing.assert_array_equal(answer.predictions, expected_labels)
    np.testing.assert_array_equal(answer.probabilities, expected_proba)


def test_the_engine_follows_the_recorded_verdict() -> None:
    model = fitted("random_forest")
    inference = verdict("random_forest")
    assert inference["engine"] == ENGINE
    served = prepare(model.pipeline, model.signature, inference)
    compiled = served.engines[0]
    assert isinstance(compiled, CompiledModel) and served.engine_for(1).name == ENGINE
    big = compiled.max_rows + 1
    assert served.engine_for(big).name == SKLEARN
    unrecorded = prepare(model.pipeline, model.signature, None)  # an older version
    assert [e.name for e in unrecorded.engines] == [SKLEARN]
    assert unrecorded.engine_for(1).name == SKLEARN
    refused = prepare(model.pipeline, model.signature, {**inference, "ok": False})
    assert [e.name for e in refused.engines] == [SKLEARN]


def test_members_without_samples_are_the_same_members() -> None:
    forest = fitted("random_forest").pipeline[-1]
    full, lean = members_of(forest), members_of(forest, with_samples=False)
    assert [m.estimator for m in full] == [m.estimator for m in lean]
    assert all(m.samples is not None for m in full) and all(m.samples is None for m in lean)


# --- training ---------------------------------------------------------------------------


def test_the_verdict_after_training_and_n_jobs_left_unset() -> None:
    assert verdict("random_forest") is not None
    voting = verdict("soft_voting")  # its decision tree is compiled (numpy: lr, nb)
    assert voting is not None and voting["ok"] is True and voting["engine"] == ENGINE
    engines = {m["name"]: m["engine"] for m in voting["members"]}
    assert engines == {"lr": "numpy", "tree": ENGINE, "nb": "numpy"}
    for kind in ("random_forest", "bagging", "soft_voting", "stacking"):
        ensemble = fitted(kind).pipeline[-1]
        assert ensemble.get_params()["n_jobs"] is None
    data = training_data("iris")
    spec = resolve_ensemble(parse_estimator_spec(SPECS["random_forest"]), data.task)
    assert not hasattr(train(data, spec, NO_EVAL, 3), "inference")  # training never compiles


@pytest.mark.parametrize("kind", ["random_forest", "bagging", "soft_voting", "stacking"])
def test_fitting_on_every_core_changes_nothing(kind: str) -> None:
    """Members fitted on three threads, counted: the very model of a plain fit."""
    data = training_data("breast_cancer")
    spec = resolve_ensemble(parse_estimator_spec(SPECS[kind]), data.task)
    columns = [FeatureColumn(f.name, f.dtype, f.n_missing > 0, f.n_unique) for f in data.features]
    one = build_pipeline(spec, data.task, columns, 3).fit(data.X, data.y)
    with members_in_parallel(MemberPool(3), members=None):
        every = build_pipeline(spec, data.task, columns, 3).fit(data.X, data.y)
    np.testing.assert_array_equal(every.predict_proba(data.X), one.predict_proba(data.X))


@pytest.mark.parametrize(
    "classes",
    [[0, 1], [-3, 2, 7], [0.5, 1.5, 2.5], ["no", "yes"], [False, True], ["a", 1, 2.5]],
    ids=["ints", "three", "floats", "strings", "bools", "objects"],
)
def test_label_positions_of_few_rows_are_those_of_many(classes: list[Any]) -> None:
    """A few rows are looked up in a dict, more by a binary search: the same positions,
    and an unknown label is a KeyError either way."""
    known = np.asarray(classes, dtype=object if len(set(map(type, classes))) > 1 else None)
    rng = np.random.default_rng(3)
    many = known[rng.integers(0, len(known), 40)]
    expected = label_positions(known, many)
    assert expected.tolist() == [classes.index(c) for c in many.tolist()]
    for n in (0, 1, 2, 8, 9):
        few = label_positions(known, many[:n])
        assert few.dtype == expected.dtype and few.tolist() == expected[:n].tolist()
    with pytest.raises(KeyError):
        label_positions(np.asarray([1, 2]), np.asarray([3]))


def test_option_problems_are_worked_out_once_per_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """Options that need no members are checked once per options (then remembered), with
    the same problems every time; options that need members are checked each time."""
    model = fitted("random_forest")
    servable = prepare(model.pipeline, model.signature, verdict("random_forest"))
    columns = {c: v.to_numpy() for c, v in sample(n=2).items()}
    calls: list[PredictOptions] = []
    real = servable_module.option_problems

    def counted(*args: Any) -> Any:
        calls.append(args[3])
        return real(*args)

    monkeypatch.setattr(servable_module, "option_problems", counted)
    plain, proba = PredictOptions(), PredictOptions(return_proba=True)
    first = [servable.predict(columns, o).predictions for o in (plain, proba, plain, proba)]
    assert calls == [plain, proba] and first[0] == first[2]
    refused = PredictOptions(return_std=True)  # regression only: needs members
    for _ in range(2):
        with pytest.raises(PredictionInputError) as exc:
            servable.predict(columns, refused)
        assert [p.loc for p in exc.value.problems] == [("options", "return_std")]
    assert calls == [plain, proba, refused, refused]


def test_the_lookup_of_the_labels_is_made_once_per_servable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A few rows' labels are found in a dict of the classes made at the first answer,
    not on every request (3 of a one-row request's microseconds): the same positions."""
    model = fitted("random_forest")
    servable = prepare(model.pipeline, model.signature, verdict("random_forest"))
    made: list[int] = []
    real = servable_module.label_lookup

    def counted(classes: Any) -> dict[Any, int]:
        made.append(1)
        return real(classes)

    monkeypatch.setattr(servable_module, "label_lookup", counted)
    data = sample(n=3)
    for n in (1, 2, 3, 1):
        columns = {c: v.to_numpy()[:n] for c, v in data.items()}
        answer = servable.predict(columns, PredictOptions())
        assert answer.predictions == list(model.pipeline.predict(pd.DataFrame(columns)))
    assert made == [1]
