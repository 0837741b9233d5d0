"""XGBoost's big requests in one call of the library on several threads: the same bits as
the stored one-thread model, its booster untouched, and the parts' way when it cannot."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import numpy as np
import pytest

from ensembles.inference import PredictOptions, prepare, row_parts
from ensembles.inference.engines import SklearnEngine
from ensembles.inference.library_threads import threaded_twin
from ensembles.inference.row_parts import RowParts
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

NO_EVAL = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
ROWS = 1_000
TWO_THREADS = RowParts(threads=2, min_rows=ROWS // 2)
XGBOOST = {"kind": "xgboost", "params": {"n_estimators": 20, "max_depth": 4}}


@cache
def fitted(name: str, spec: str = json.dumps(XGBOOST)) -> FittedModel:
    data = training_data(name)
    resolved = resolve_ensemble(parse_estimator_spec(json.loads(spec)), data.task)
    return train(data, resolved, NO_EVAL, 0)


def rows(model: FittedModel, name: str, n: int = ROWS) -> np.ndarray[Any, Any]:
    """``n`` preprocessed rows drawn from the training table, some cells missing."""
    X = training_data(name).X
    frame = X.iloc[np.random.default_rng(1).integers(0, len(X), n)].reset_index(drop=True)
    Xt = np.asarray(model.pipeline[:-1].transform(frame), dtype=np.float64)
    Xt[np.random.default_rng(2).random(Xt.shape) < 0.05] = np.nan  # XGBoost's own missing
    return Xt


def nthread(estimator: Any) -> str:
    config = json.loads(estimator.get_booster().save_config())
    return str(config["learner"]["generic_param"]["nthread"])


def no_pool(workers: int) -> Any:
    raise AssertionError("the request was cut into parts")


@pytest.mark.parametrize("name", ["breast_cancer", "wine", "diabetes"])
def test_a_big_xgboost_request_is_one_call_on_two_threads_with_the_same_bits(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Binary, three classes and regression: labels and probabilities (values) of the
    one-thread call, bit for bit, from one call of a twin on two threads, no parts."""
    model = fitted(name)
    task = model.signature.task
    engine = SklearnEngine(model.pipeline[-1], task)
    Xt = rows(model, name)
    one = engine.answer(Xt, with_proba=True)
    monkeypatch.setattr(row_parts, "_pool", no_pool)
    two = TWO_THREADS.answer(engine, Xt, with_proba=True)
    assert np.array_equal(two.predictions, one.predictions)
    if task == "classification":
        assert two.probabilities is not None and one.probabilities is not None
        assert np.array_equal(two.probabilities.view(np.int64), one.probabilities.view(np.int64))
    else:
        assert np.array_equal(two.predictions.view(np.int64), one.predictions.view(np.int64))
    assert two.engine == one.engine
    twin = threaded_twin(model.pipeline[-1], 2)
    assert twin is not None and nthread(twin) == "2"
    assert nthread(model.pipeline[-1]) == "1"  # the stored model as it was
    assert model.pipeline[-1].n_jobs == 1


def test_a_model_stopped_early_predicts_with_its_best_rounds_on_two_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Early stopping: the twin's booster keeps the best round, so it predicts with the
    rounds the stored model predicts with (fewer than it fitted)."""
    spec = {"kind": "xgboost", "params": {"n_estimators": 200, "early_stopping_rounds": 2}}
    model = fitted("breast_cancer", json.dumps(spec))
    estimator = model.pipeline[-1]
    assert estimator.best_iteration + 1 < estimator.get_booster().num_boosted_rounds()
    engine = SklearnEngine(estimator, "classification")
    Xt = rows(model, "breast_cancer")
    one = engine.answer(Xt, with_proba=True)
    monkeypatch.setattr(row_parts, "_pool", no_pool)
    two = TWO_THREADS.answer(engine, Xt, with_proba=True)
    assert two.probabilities is not None and one.probabilities is not None
    assert np.array_equal(two.probabilities.view(np.int64), one.probabilities.view(np.int64))
    assert np.array_equal(two.predictions, one.predictions)


def test_the_servable_answers_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the servable (the request's checked columns): the same predictions and
    probabilities as the one-thread servable's, and as the Pipeline's own."""
    model = fitted("breast_cancer")
    X = training_data("breast_cancer").X
    frame = X.iloc[np.random.default_rng(3).integers(0, len(X), ROWS)].reset_index(drop=True)
    columns = {c: frame[c].to_numpy() for c in frame.columns}
    options = PredictOptions(return_proba=True)
    whole = prepare(model.pipeline, model.signature, None).predict(columns, options)
    monkeypatch.setattr(row_parts, "_pool", no_pool)
    threaded = prepare(model.pipeline, model.signature, None, TWO_THREADS)
    got = threaded.predict(columns, options)
    assert got.predictions == whole.predictions == model.pipeline.predict(frame).tolist()
    assert got.probabilities is not None
    library = np.asarray(model.pipeline.predict_proba(frame), dtype=np.float64)
    assert np.array_equal(np.asarray(got.probabilities).view(np.int64), library.view(np.int64))


def test_while_other_parts_run_the_request_is_one_call_on_one_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = fitted("breast_cancer")
    engine = SklearnEngine(model.pipeline[-1], "classification")
    Xt = rows(model, "breast_cancer")
    monkeypatch.setattr(row_parts, "_BUSY", [1])
    monkeypatch.setattr(row_parts, "_pool", no_pool)
    asked: list[int] = []
    monkeypatch.setattr(
        SklearnEngine, "answer_threads", lambda self, X, threads, **kw: asked.append(threads)
    )
    got = TWO_THREADS.answer(engine, Xt, with_proba=True)
    assert asked == []
    assert np.array_equal(got.predictions, engine.answer(Xt).predictions)


def test_other_kinds_have_no_twin_and_are_answered_in_parts() -> None:
    spec = json.dumps({"kind": "random_forest", "params": {"n_estimators": 10}})
    forest = fitted("breast_cancer", spec).pipeline[-1]
    assert threaded_twin(forest, 2) is None
    assert threaded_twin(fitted("breast_cancer").pipeline[-1], 1) is None
    engine = SklearnEngine(forest, "classification")
    assert engine.answer_threads(np.zeros((4, forest.n_features_in_)), 2) is None
