"""The engine verdict beside the measuring (ensembles.engine_verdict): the same figures,
the same verdict and the same artifact as the verdict made after ``train()``; ``train()``
waits for it before it stores the estimator's threads; a cancel ends the wait."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any

import joblib
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from ensembles import evaluation, training
from ensembles.engine_verdict import EngineVerdict
from ensembles.errors import TrainingCancelledError
from ensembles.explain import summary as summary_module
from ensembles.inference import ENGINE, compiling, gtil, inference_verdict
from ensembles.inference import compiled as compiled_module
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

RS = 3
HOLDOUT = EvaluationSpec(holdout_fraction=0.2, cv_folds=0)
PLAN_FOR = "ensembles.inference.compiling.plan_for"  # the check's first step
TIMED = ("compile_seconds", "check_seconds", "crossover_rows")
KINDS: list[tuple[str, dict[str, Any]]] = [
    ("breast_cancer", {"kind": "random_forest", "params": {"n_estimators": 12}}),
    ("wine", {"kind": "lightgbm", "params": {"n_estimators": 30}}),
    (
        "iris",
        {"kind": "lightgbm", "params": {"n_estimators": 300, "early_stopping_rounds": 5}},
    ),
    ("diabetes", {"kind": "xgboost", "params": {"n_estimators": 20}}),
    (
        "iris",
        {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [
                {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 5}},
                {"name": "nb", "kind": "gaussian_nb"},
            ],
        },
    ),
    (
        "iris",
        {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [
                {"name": "lgb", "kind": "lightgbm", "params": {"n_estimators": 20}},
                {"name": "nb", "kind": "gaussian_nb"},
            ],
        },
    ),
]


def _train(dataset: str, raw: dict[str, Any], **kw: Any) -> FittedModel:
    data = training_data(dataset)
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    return train(data, spec, HOLDOUT, RS, pool=MemberPool.local(2), **kw)


def _artifact(pipeline: Pipeline) -> bytes:
    out = io.BytesIO()
    joblib.dump(pipeline, out)
    return out.getvalue()


@pytest.mark.parametrize(("dataset", "raw"), KINDS, ids=[f"{raw['kind']}-{d}" for d, raw in KINDS])
def test_the_verdict_beside_is_the_verdict_after(dataset: str, raw: dict[str, Any]) -> None:
    task = training_data(dataset).task
    after = _train(dataset, raw)
    verdict_after = inference_verdict(after.pipeline, task, after.train_rows, RS, 2)
    beside = EngineVerdict(task, RS, 2)
    fitted = _train(dataset, raw, on_fitted=beside.start)
    verdict = beside.result()
    assert fitted.metrics.model_dump() == after.metrics.model_dump()
    assert fitted.feature_importances == after.feature_importances
    assert _artifact(fitted.pipeline) == _artifact(after.pipeline)
    assert {k: v for k, v in verdict.items() if k not in TIMED} == {
        k: v for k, v in verdict_after.items() if k not in TIMED
    }
    assert verdict["engine"] == ENGINE


def test_train_waits_for_the_work_beside_before_it_stores_one_thread() -> None:
    """The check reads the estimator: train() waits for it after the figures, and only
    then gives LightGBM the one thread it is stored with."""
    stages: list[str] = []
    seen: list[tuple[str, Any]] = []

    def on_fitted(pipeline: Pipeline, X: pd.DataFrame) -> Any:
        seen.append(("started", pipeline[-1].n_jobs))
        return lambda: seen.append(("waited", (pipeline[-1].n_jobs, stages[-1])))

    fitted = _train(
        "wine",
        {"kind": "lightgbm", "params": {"n_estimators": 10}},
        on_fitted=on_fitted,
        on_progress=lambda _d, _t, stage: stages.append(stage),
    )
    assert seen == [("started", 2), ("waited", (2, "measuring"))]
    assert stages.index("evaluating") > stages.index("fitting")
    assert fitted.pipeline[-1].n_jobs == 1


def test_a_lightgbm_check_starts_before_its_answers_are_read_and_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model is final when LightGBM's fit returns: the check starts then, beside the
    reading and checking of the answers LightGBM kept (``ScoreWatch.answers``), not
    after them; the figures still come from those answers."""
    from ensembles.kinds.lightgbm_scores import ScoreWatch

    events: list[str] = []
    read = ScoreWatch.answers

    def answers(self: ScoreWatch, estimator: Any, X: Any) -> Any:
        events.append("answers")
        kept = read(self, estimator, X)
        events.append("kept" if kept is not None else "not kept")
        return kept

    def on_fitted(pipeline: Pipeline, X: pd.DataFrame) -> Any:
        events.append("started")
        return lambda: None

    monkeypatch.setattr(ScoreWatch, "answers", answers)
    _train("wine", {"kind": "lightgbm", "params": {"n_estimators": 10}}, on_fitted=on_fitted)
    assert events == ["started", "answers", "kept"]


def test_the_check_never_asks_the_fitted_lightgbm_booster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LightGBM's predictions on one booster set its iteration range: beside the figures'
    staged predictions they read ranges changed under them, and a worker died of it
    (SIGABRT).  The check asks a copy of its own; the verdict is the same and is
    calibrated on the fitted estimator (as it is served)."""
    import lightgbm

    asked: list[tuple[int, str]] = []
    own = lightgbm.LGBMClassifier.predict_proba

    def predict_proba(self: Any, X: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append((id(self), threading.current_thread().name))
        return own(self, X, *args, **kwargs)

    monkeypatch.setattr(lightgbm.LGBMClassifier, "predict_proba", predict_proba)
    raw = {"kind": "lightgbm", "params": {"n_estimators": 300, "early_stopping_rounds": 5}}
    beside = EngineVerdict("classification", RS, 2)
    fitted = _train("iris", raw, on_fitted=beside.start)
    main = threading.current_thread().name
    fitted_id = id(fitted.pipeline[-1])
    assert any(who == fitted_id for who, _ in asked)  # the figures asked it
    assert {thread for who, thread in asked if who == fitted_id} == {main}
    assert {thread for who, thread in asked if who != fitted_id} - {main}  # the check's copy
    beside.wait()
    assert beside._checked is not None and beside._checked[0] is not None
    assert beside._checked[0].pipeline is fitted.pipeline
    assert beside.result()["engine"] == ENGINE


def test_a_composite_holding_lightgbm_is_checked_in_the_wait() -> None:
    """Its figures ask each member: the check of a composite with a LightGBM member
    waits for them (it starts in the wait), as a plain LightGBM model need not."""
    fitted = _train(
        "iris",
        {
            "kind": "bagging",
            "params": {"n_estimators": 3},
            "estimator": {"kind": "lightgbm", "params": {"n_estimators": 10}},
        },
    )
    checked = threading.Event()
    verdict = EngineVerdict("classification", RS, 2, on_checked=checked.set)
    wait = verdict.start(fitted.pipeline, fitted.train_rows)
    assert not checked.wait(1.0)
    wait()
    assert checked.is_set()
    assert verdict.result()["engine"] == ENGINE


def test_a_check_started_with_the_fit_is_released_when_the_fit_then_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Started before the answers are read, the check is let go (``on_explaining``) when
    train() fails after it: nothing waits for a summary that will not run."""
    from ensembles.kinds.lightgbm_scores import ScoreWatch

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("broken by the test")

    monkeypatch.setattr(ScoreWatch, "answers", broken)
    released: list[str] = []
    verdict = EngineVerdict("classification", RS, 2)
    with pytest.raises(RuntimeError, match="broken by the test"):
        _train(
            "wine",
            {"kind": "lightgbm", "params": {"n_estimators": 10}},
            on_fitted=verdict.start,
            on_explaining=lambda: released.append("explaining"),
        )
    assert released == ["explaining"]
    verdict.wait()  # the check itself ends


def test_a_cancel_ends_the_wait_for_a_check_that_does_not_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fitted = _train("iris", {"kind": "random_forest", "params": {"n_estimators": 4}})
    cancel, release = threading.Event(), threading.Event()

    def blocked(estimator: Any, task: Any) -> str:
        cancel.set()
        release.wait(20)
        return "refused by the test"

    monkeypatch.setattr(PLAN_FOR, blocked)
    verdict = EngineVerdict("classification", RS, 1, cancel)
    try:
        wait = verdict.start(fitted.pipeline, fitted.train_rows)
        with pytest.raises(TrainingCancelledError):
            wait()
        assert not release.is_set()
    finally:
        release.set()
    cancel.clear()  # released, the check ends with its refusal
    assert verdict.result()["reason"] == "refused by the test"


def test_what_the_check_raises_is_raised_by_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    fitted = _train("iris", {"kind": "random_forest", "params": {"n_estimators": 4}})

    def broken(estimator: Any, task: Any) -> str:
        raise RuntimeError("broken by the test")

    monkeypatch.setattr(PLAN_FOR, broken)
    verdict = EngineVerdict("classification", RS, 1)
    verdict.start(fitted.pipeline, fitted.train_rows)()  # the wait itself does not raise
    with pytest.raises(RuntimeError, match="broken by the test"):
        verdict.result()


def _events(
    monkeypatch: pytest.MonkeyPatch, verdict: EngineVerdict, hold_s: float
) -> tuple[list[str], Callable[[], None]]:
    """What happens after the fit, in order: "figures" once the scores are measured,
    "explaining" as train() says the summary begins (the returned ``on_explaining``),
    "gtil" when the check's thread asks GTIL.  The scores wait for GTIL's call (at most
    ``hold_s``): a check that does not hold GTIL until the summary asks it meanwhile."""
    events: list[str] = []
    asked = threading.Event()
    real_scores, real_gtil = evaluation.score_fit, gtil.gtil_scores

    def gtil_scores(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "engine-verdict":
            events.append("gtil")
            asked.set()
        return real_gtil(*args, **kwargs)

    def scores(*args: Any, **kwargs: Any) -> Any:
        asked.wait(hold_s)
        events.append("figures")
        return real_scores(*args, **kwargs)

    def explaining() -> None:
        events.append("explaining")
        verdict.explaining()

    monkeypatch.setattr(compiled_module, "gtil_scores", gtil_scores)
    monkeypatch.setattr(training, "score_fit", scores)
    return events, explaining


def test_a_forest_check_holds_gtil_until_the_summary_begins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """shap's TreeSHAP holds the GIL on one core: GTIL's answers wait for it and take the
    other core then, instead of taking a core from the figures (fails on the code before:
    GTIL answered during the figures).  A forest is explained before its figures
    (``ensembles.leaf_walks``): GTIL answers as the summary begins, the figures after."""
    raw = {"kind": "random_forest", "params": {"n_estimators": 12}}
    after = _train("breast_cancer", raw)
    verdict = EngineVerdict("classification", RS, 2)
    events, explaining = _events(monkeypatch, verdict, hold_s=2.0)
    fitted = _train("breast_cancer", raw, on_fitted=verdict.start, on_explaining=explaining)
    result = verdict.result()
    assert events == ["explaining", "gtil", "figures"]
    assert result["engine"] == ENGINE
    assert fitted.metrics.model_dump() == after.metrics.model_dump()
    verdict_after = inference_verdict(after.pipeline, "classification", after.train_rows, RS, 2)
    assert {k: v for k, v in result.items() if k not in TIMED} == {
        k: v for k, v in verdict_after.items() if k not in TIMED
    }


def test_a_forest_explained_first_holds_the_checks_own_side_until_the_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """scikit-learn's side of a forest's check needs the GIL for every tree: it waits
    for the figures (``on_measuring``) instead of taking turns with the summary's
    TreeSHAP, while GTIL answers beside the summary (fails on the code before: both
    sides began as the summary did); the verdict is the same."""
    raw = {"kind": "random_forest", "params": {"n_estimators": 12}}
    after = _train("breast_cancer", raw)
    verdict = EngineVerdict("classification", RS, 2)
    events: list[str] = []
    real_own, real_gtil = compiling.own_answers, gtil.gtil_scores
    real_summary = summary_module.explanation_summary
    gtil_asked = threading.Event()

    def own_answers(*args: Any, **kwargs: Any) -> Any:
        events.append("own")
        return real_own(*args, **kwargs)

    def gtil_scores(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "engine-verdict":
            events.append("gtil")
            gtil_asked.set()
        return real_gtil(*args, **kwargs)

    def summary(*args: Any, **kwargs: Any) -> Any:
        events.append("summary")
        gtil_asked.wait(10.0)  # GTIL answers beside the summary, not after it
        result = real_summary(*args, **kwargs)
        events.append("summary done")
        return result

    def measuring() -> None:
        events.append("measuring")
        verdict.measuring()

    monkeypatch.setattr(compiling, "own_answers", own_answers)
    monkeypatch.setattr(compiled_module, "gtil_scores", gtil_scores)
    monkeypatch.setattr(training, "explanation_summary", summary)
    fitted = _train(
        "breast_cancer", raw, on_fitted=verdict.start, on_explaining=verdict.explaining,
        on_measuring=measuring,
    )  # fmt: skip
    result = verdict.result()
    assert events.index("gtil") < events.index("summary done")
    assert events.index("summary done") < events.index("measuring") < events.index("own")
    assert fitted.metrics.model_dump() == after.metrics.model_dump()
    verdict_after = inference_verdict(after.pipeline, "classification", after.train_rows, RS, 2)
    assert {k: v for k, v in result.items() if k not in TIMED} == {
        k: v for k, v in verdict_after.items() if k not in TIMED
    }


def test_a_lightgbm_check_asks_gtil_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """LightGBM explains with its own threads, without the GIL: nothing to wait for."""
    verdict = EngineVerdict("classification", RS, 2)
    events, explaining = _events(monkeypatch, verdict, hold_s=60.0)
    _train(
        "wine",
        {"kind": "lightgbm", "params": {"n_estimators": 10}},
        on_fitted=verdict.start,
        on_explaining=explaining,
    )
    assert verdict.result()["engine"] == ENGINE
    assert events == ["gtil", "figures", "explaining"]


def test_a_check_held_for_the_summary_ends_when_the_measuring_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked = threading.Event()

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("broken by the test")

    monkeypatch.setattr(training, "measure_science", broken)
    verdict = EngineVerdict("classification", RS, 2, on_checked=checked.set)
    with pytest.raises(RuntimeError, match="broken by the test"):
        _train(
            "breast_cancer",
            {"kind": "random_forest", "params": {"n_estimators": 6}},
            on_fitted=verdict.start,
            on_explaining=verdict.explaining,
            on_measuring=verdict.measuring,
        )
    assert checked.wait(60)  # not held for a summary or figures that never run
