"""A big request answered in parts on several threads (``ensembles.inference.row_parts``):
the parts really run on other threads, and every row's answer is bit for bit the one a
single call gives, which is the library's own answer; engines whose rows are not apart
(members of any kind, a library on its own threads) are answered in one call."""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray

from ensembles.inference import CompiledModel, PredictOptions, compile_model, prepare
from ensembles.inference.engines import Answer, Engine, SklearnEngine
from ensembles.inference.row_parts import RowParts
from ensembles.inference.servable import Servable
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
NO_EVAL = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
SPECS: dict[str, dict[str, Any]] = {
    "xgboost": {"kind": "xgboost", "params": {"n_estimators": 20, "max_depth": 4}},
    "random_forest": {"kind": "random_forest", "params": {"n_estimators": 20}},
    "gradient_boosting": {"kind": "gradient_boosting", "params": {"n_estimators": 20}},
    "lightgbm": {"kind": "lightgbm", "params": {"n_estimators": 20}},
    "hist_gradient_boosting": {"kind": "hist_gradient_boosting", "params": {"max_iter": 10}},
    "stacking": {
        "kind": "stacking",
        "params": {"cv": 3},
        "estimators": [
            {"name": "lr", "kind": "logistic_regression"},
            {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
        ],
    },
}
ROWS = 1_000
TWO_PARTS = RowParts(threads=2, min_rows=ROWS // 2)


@dataclass(frozen=True, eq=False)
class Recorded:
    """A real engine, with the thread and row count of each of its calls written down."""

    engine: Engine
    calls: list[tuple[str, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def native(self) -> bool:
        return self.engine.native

    @property
    def rows_apart(self) -> bool:
        return self.engine.rows_apart

    def use_for(self, n_rows: int) -> bool:
        return self.engine.use_for(n_rows)

    def answer(self, Xt: NDArray[Any], *, with_proba: bool = False) -> Answer:
        self.calls.append((threading.current_thread().name, Xt.shape[0]))
        return self.engine.answer(Xt, with_proba=with_proba)


@cache
def fitted(kind: str, name: str = "breast_cancer") -> FittedModel:
    data = training_data(name)
    spec = resolve_ensemble(parse_estimator_spec(SPECS[kind]), data.task)
    return train(data, spec, NO_EVAL, 0)


def request(model: FittedModel, n: int, name: str = "breast_cancer") -> dict[str, Any]:
    """``n`` rows drawn from the training table, as checked columns."""
    X = training_data(name).X
    frame = X.iloc[np.random.default_rng(1).integers(0, len(X), n)].reset_index(drop=True)
    return {c: frame[c].to_numpy() for c in frame.columns}


def recorded(servable: Servable, parts: RowParts) -> tuple[Servable, list[Recorded]]:
    engines = [Recorded(e) for e in servable.engines]
    return replace(servable, engines=tuple(engines), row_parts=parts), engines


def frame_of(columns: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame(columns)


@pytest.mark.parametrize("kind", ["xgboost", "random_forest"])
def test_a_big_request_is_answered_in_parts_on_two_threads_with_the_same_bits(kind: str) -> None:
    model = fitted(kind)
    one = prepare(model.pipeline, model.signature, None)  # one thread, as before
    two, (engine,) = recorded(one, TWO_PARTS)
    columns = request(model, ROWS)
    options = PredictOptions(return_proba=True)
    split, whole = two.predict(columns, options), one.predict(columns, options)
    # Two calls of the library's engine, on two threads, half of the rows each.
    assert sorted(n for _, n in engine.calls) == [ROWS // 2, ROWS // 2]
    assert len({thread for thread, _ in engine.calls}) == 2
    assert split.predictions == whole.predictions
    assert split.probabilities is not None and whole.probabilities is not None
    assert np.array_equal(np.asarray(split.probabilities), np.asarray(whole.probabilities))
    # ... which is the library's own answer on all the rows at once.
    frame = frame_of(columns)
    library = np.asarray(model.pipeline.predict_proba(frame), dtype=np.float64)
    assert np.array_equal(np.asarray(split.probabilities), library)
    assert split.predictions == model.pipeline.predict(frame).tolist()


@pytest.mark.parametrize("kind", ["xgboost", "random_forest"])
def test_the_compiled_engine_s_rows_are_answered_in_parts_too(kind: str) -> None:
    model = fitted(kind)
    X = training_data("breast_cancer").X
    engine, _ = compile_model(model.pipeline, "classification", X, calibrate=False)
    assert isinstance(engine, CompiledModel) and engine.rows_apart
    base = prepare(model.pipeline, model.signature, None)
    one = replace(base, engines=(engine, *base.engines))
    n = engine.max_rows  # the largest request GTIL answers
    two, (gtil, library) = recorded(one, RowParts(threads=2, min_rows=n // 2))
    columns = request(model, n)
    split = two.answer(columns, with_proba=True)
    whole = one.answer(columns, with_proba=True)
    assert len(gtil.calls) == 2 and not library.calls
    assert len({thread for thread, _ in gtil.calls}) == 2
    assert split.engine == whole.engine == engine.name
    assert np.array_equal(split.predictions, whole.predictions)
    assert split.probabilities is not None and whole.probabilities is not None
    assert np.array_equal(split.probabilities, whole.probabilities)
    library_proba = model.pipeline.predict_proba(frame_of(columns))
    assert np.max(np.abs(split.probabilities - library_proba)) <= 1e-9


@pytest.mark.parametrize(
    ("kind", "apart"),
    [
        ("xgboost", True),
        ("random_forest", True),
        ("gradient_boosting", True),
        ("lightgbm", True),
        ("hist_gradient_boosting", False),  # its own OpenMP threads
        ("stacking", False),  # a linear member's BLAS
    ],
)
def test_only_engines_whose_rows_are_apart_are_split(kind: str, apart: bool) -> None:
    model = fitted(kind)
    servable, engines = recorded(prepare(model.pipeline, model.signature, None), TWO_PARTS)
    answer = servable.answer(request(model, ROWS))
    calls = [call for engine in engines for call in engine.calls]
    assert len(calls) == (2 if apart else 1)
    expected = model.pipeline.predict(frame_of(request(model, ROWS)))
    assert np.array_equal(answer.predictions, expected)


def test_a_forest_stored_with_its_own_threads_is_answered_in_one_call() -> None:
    forest = copy.deepcopy(fitted("random_forest").pipeline[-1])
    assert SklearnEngine(forest, "classification").rows_apart
    forest.set_params(n_jobs=-1)
    assert not SklearnEngine(forest, "classification").rows_apart


@pytest.mark.parametrize(
    ("parts", "n_rows", "expected"),
    [
        (RowParts(), 100_000, 1),
        (RowParts(threads=2, min_rows=2_000), 3_999, 1),
        (RowParts(threads=2, min_rows=2_000), 4_000, 2),
        (RowParts(threads=4, min_rows=2_000), 7_000, 3),
        (RowParts(threads=4, min_rows=2_000), 100_000, 4),
    ],
)
def test_a_request_is_cut_only_into_parts_of_min_rows_or_more(
    parts: RowParts, n_rows: int, expected: int
) -> None:
    assert parts.parts_for(n_rows) == expected


@pytest.mark.parametrize("bad", [{"threads": 0}, {"min_rows": 0}])
def test_row_parts_refuse_fewer_than_one(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RowParts(**bad)
