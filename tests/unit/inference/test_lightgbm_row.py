"""A compiled LightGBM model's one-row requests answered by LightGBM's own single-row
predictor (issue 22), with GTIL's bits: kept at load time only if its raw scores are
GTIL's on every check row, else GTIL answers; safe from several threads; its handles
freed with it."""

from __future__ import annotations

import gc
import pickle
import threading
from dataclasses import replace
from typing import Any

import lightgbm
import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from ensembles.inference import CompiledModel, compiled, compiling, lightgbm_row, rebuild
from ensembles.inference.lightgbm_row import LightGBMRow, input_edges, row_predictor
from tests.unit.inference.test_batches import servable
from tests.unit.inference.test_library_compiled import (
    CASES,
    _categorical_table,
    _code_rows,
    check_rows,
    compiled_case,
    fitted,
    library,
    table,
)

LIGHTGBM_CASES = [
    "lightgbm-binary",
    "lightgbm-binary-missing",
    "lightgbm-multiclass-iris",
    "lightgbm-l2",
    "lightgbm-huber",
]


def served(pipeline: Pipeline, task: Any, X: Any) -> CompiledModel:
    """The engine as the service loads it: compiled at training, rebuilt at load time."""
    _, report = compiling.compile_model(pipeline, task, X, calibrate=False)
    assert report.ok, report.reason
    stored = pickle.loads(pickle.dumps(pipeline))  # as the registry stores the artifact
    engine, rebuilt = rebuild(stored, task, report.as_dict())
    assert rebuilt.ok, rebuilt.reason
    assert isinstance(engine, CompiledModel)
    return engine


def served_case(case: str) -> tuple[CompiledModel, NDArray[Any]]:
    name, task, _, _ = CASES[case]
    engine = served(fitted(case), task, table(name)[0])
    rows = check_rows(engine.pipeline, table(name)[0])
    return engine, np.vstack([rows, input_edges(rows, engine.plan.truncated)])


def one_by_one(engine: CompiledModel, rows: NDArray[Any]) -> list[Any]:
    """Each row answered alone (labels and probabilities, or values), as a request."""
    if engine.task == "regression":
        return [engine.predict(rows[i : i + 1].copy()) for i in range(len(rows))]
    return [engine.predict_with_proba(rows[i : i + 1].copy()) for i in range(len(rows))]


def assert_rows_answered_alone_as_together(engine: CompiledModel, rows: NDArray[Any]) -> None:
    """Row for row, the bits of the answer to all the rows at once (GTIL's)."""
    alone = one_by_one(engine, rows)
    if engine.task == "regression":
        together = engine.predict(rows)
        for i, values in enumerate(alone):
            assert values.tobytes() == together[i : i + 1].tobytes(), i
        return
    labels, proba = engine.predict_with_proba(rows)
    for i, (label, p) in enumerate(alone):
        assert label.tolist() == labels[i : i + 1].tolist(), i
        assert p.shape == (1, proba.shape[1]) and p.flags.c_contiguous
        assert p.tobytes() == proba[i : i + 1].tobytes(), i


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Calls of every predictor's ``scores`` that LightGBM answered."""
    calls: list[int] = []
    real = LightGBMRow.scores

    def scores(self: LightGBMRow, X: NDArray[np.float64]) -> NDArray[np.float64] | None:
        found = real(self, X)
        calls.append(found is not None)
        return found

    monkeypatch.setattr(LightGBMRow, "scores", scores)
    return calls


@pytest.mark.parametrize("case", LIGHTGBM_CASES)
def test_one_row_is_lightgbm_s_and_the_bits_of_the_rows_answer(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training rows, rows on every threshold, missing values, and cells LightGBM reads by
    its own rules (tiny values, -0.0): alone, each row gets the bits it gets in a batch."""
    engine, rows = served_case(case)
    assert engine.single_row is not None
    calls = counted(monkeypatch)
    assert_rows_answered_alone_as_together(engine, rows)
    assert len(calls) == len(rows) and all(calls)  # LightGBM answered every lone row
    plain = replace(engine, single_row=None)
    assert_rows_answered_alone_as_together(plain, rows[:50])  # and GTIL's lone rows too


def test_categorical_codes_are_read_alone_as_gtil_reads_them_cast() -> None:
    """LightGBM's predictor reads a code in (-1, 0) as category 0 itself (the engine casts
    it for GTIL): codes known, unseen, negative, fractional, missing, huge."""
    X, y = _categorical_table()
    model = library(lightgbm.LGBMClassifier, min_data_per_group=5, cat_smooth=1.0)
    pipeline = Pipeline([("identity", FunctionTransformer()), ("model", model)])
    pipeline.fit(X, y, model__categorical_feature=[4])
    engine = served(pipeline, "classification", X)
    assert engine.plan.truncated == (4,) and engine.single_row is not None
    rows = _code_rows(X)
    assert_rows_answered_alone_as_together(engine, rows)
    labels, proba = engine.predict_with_proba(rows)  # and these are LightGBM's answers
    np.testing.assert_array_equal(labels, model.predict(rows))
    np.testing.assert_allclose(proba, model.predict_proba(rows), rtol=0, atol=1e-9)


def test_early_stopped_model_keeps_its_best_iteration_alone() -> None:
    X, y = table("breast_cancer")
    Xa, ya, Xv, yv = X.iloc[::2], y.iloc[::2], X.iloc[1::2], y.iloc[1::2]
    model = library(lightgbm.LGBMClassifier, n_estimators=300, learning_rate=0.5)
    model.fit(Xa, ya, eval_set=[(Xv, yv)], callbacks=[lightgbm.early_stopping(3, False)])
    assert model.best_iteration_ < 300
    pipeline = Pipeline([("identity", FunctionTransformer()), ("model", model)])
    engine = served(pipeline, "classification", Xa)
    assert engine.single_row is not None
    rows = check_rows(pipeline, X)
    assert_rows_answered_alone_as_together(engine, rows)
    alone = np.vstack([p for _, p in one_by_one(engine, rows[:100])])
    np.testing.assert_allclose(alone, model.predict_proba(rows[:100]), rtol=0, atol=1e-9)


def test_a_predictor_not_of_gtil_s_bits_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """One row's raw score an ulp off GTIL's: no predictor, GTIL answers one row too."""
    engine, rows = served_case("lightgbm-binary")
    cast = engine._input(rows)
    assert cast is not None
    expected = engine._scores(cast)
    kept = row_predictor(engine.estimator, engine._n_features, rows, expected)
    assert kept is not None
    off = expected.copy()
    off[len(off) // 2, 0] = np.nextafter(off[len(off) // 2, 0], np.inf)
    assert row_predictor(engine.estimator, engine._n_features, rows, off) is None

    real = compiled.gtil_scores
    monkeypatch.setattr(compiled, "gtil_scores", lambda *a: np.nextafter(real(*a), np.inf))
    plain = replace(engine, single_row=None)
    assert compiled.with_single_row(plain, rows).single_row is None


def test_the_edge_rows_tell_lightgbm_s_reading_from_a_literal_one() -> None:
    """The edge rows are what makes handing LightGBM the row as it comes safe: GTIL's
    scores of them uncast (1e-35 is not 0 for it) are not LightGBM's, and the check sees
    it (LightGBM splits next to zero at +-1e-35)."""
    engine, rows = served_case("lightgbm-binary")
    edges = input_edges(rows, ())
    literal = engine._scores(edges)  # GTIL on the rows uncast: 1e-35 is not 0 for it
    assert row_predictor(engine.estimator, engine._n_features, edges, literal) is None


def test_other_models_keep_gtil_for_one_row() -> None:
    X, y = table("breast_cancer")
    forest = Pipeline([("identity", FunctionTransformer()), ("model", RandomForestClassifier(10))])
    forest.fit(X, y)
    for engine in (
        compiled_case("xgboost-binary_logistic")[0],
        compiling.compile_model(forest, "classification", X, calibrate=False)[0],
    ):
        assert isinstance(engine, CompiledModel)
        rows = np.zeros((3, engine._n_features))
        assert compiled.with_single_row(engine, rows).single_row is None


def test_rows_the_predictor_cannot_read_go_to_gtil(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only row (no writable buffer to hand LightGBM) is GTIL's, with the same bits."""
    engine, rows = served_case("lightgbm-binary")
    assert engine.single_row is not None
    row = rows[3:4].copy()
    want = engine.predict_with_proba(row)
    row.setflags(write=False)
    calls = counted(monkeypatch)
    labels, proba = engine.predict_with_proba(row)
    assert calls == [False]
    assert labels.tolist() == want[0].tolist() and proba.tobytes() == want[1].tobytes()
    assert engine.single_row.scores(np.zeros((1, engine._n_features + 1))) is None
    assert engine.single_row.scores(np.zeros((1, engine._n_features), np.float32)) is None


def test_threads_sharing_the_predictor_get_each_row_s_own_answer() -> None:
    engine, rows = served_case("lightgbm-multiclass-iris")
    assert engine.single_row is not None
    want = one_by_one(engine, rows)
    errors: list[str] = []
    start = threading.Barrier(4)

    def run(offset: int) -> None:
        start.wait()
        for _ in range(3):
            for i in range(offset, len(rows), 2):
                labels, proba = engine.predict_with_proba(rows[i : i + 1].copy())
                if proba.tobytes() != want[i][1].tobytes() or labels[0] != want[i][0][0]:
                    errors.append(f"row {i}")

    threads = [threading.Thread(target=run, args=(k % 2,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


class _Counting:
    """The library with its frees counted."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.load, self.init, self.predict = real.load, real.init, real.predict
        self.parameters = real.parameters
        self.freed: list[str] = []

    def free_config(self, handle: Any) -> int:
        self.freed.append("config")
        return int(self.real.free_config(handle))

    def free_booster(self, handle: Any) -> int:
        self.freed.append("booster")
        return int(self.real.free_booster(handle))


def test_handles_are_freed_with_the_predictor() -> None:
    engine, rows = served_case("lightgbm-binary")
    cast = engine._input(rows)
    assert cast is not None
    library = _Counting(lightgbm_row._opened())
    found = row_predictor(engine.estimator, engine._n_features, rows, engine._scores(cast), library)
    assert found is not None and library.freed == []
    model = replace(engine, single_row=found)
    del found
    gc.collect()
    assert library.freed == []  # the model holds it
    del model
    gc.collect()
    assert sorted(library.freed) == ["booster", "config"]

    refused = _Counting(lightgbm_row._opened())
    off = engine._scores(cast) + 1.0
    assert row_predictor(engine.estimator, engine._n_features, rows, off, refused) is None
    gc.collect()
    assert sorted(refused.freed) == ["booster", "config"]  # a refused one is freed too


def test_the_service_s_lightgbm_version_answers_one_row_by_lightgbm() -> None:
    """As ``prepare`` loads a trained version (the batching tests' model)."""
    engine = servable("lightgbm").engine_for(1)
    assert isinstance(engine, CompiledModel) and engine.single_row is not None


@pytest.mark.parametrize("threads", [3, 0])
def test_loading_leaves_lightgbm_s_default_thread_count_as_it_was(threads: int) -> None:
    """The predictor's init sets LightGBM's process-wide default thread count from its
    parameters (as every LightGBM call does from its own): it is given the count set."""
    engine, rows = served_case("lightgbm-binary")
    engine.estimator.predict(rows[:2], num_threads=threads)  # sets it (0: LightGBM's own)
    library = lightgbm_row._opened()
    assert library is not None and library.default_threads is not None
    before = library.default_threads.value
    assert before == (threads if threads > 0 else -1)
    cast = engine._input(rows)
    assert cast is not None
    found = row_predictor(engine.estimator, engine._n_features, rows, engine._scores(cast))
    assert found is not None
    assert library.default_threads.value == before
