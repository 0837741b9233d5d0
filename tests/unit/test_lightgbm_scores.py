"""LightGBM's answers read from its score updaters while the service fits it
(``ensembles.kinds.lightgbm_scores``): the training rows' and the hold-out rows' final
answers are ``predict_proba`` / ``predict``'s bits and the curve's are ``predict_at``'s,
for binary, multiclass and regression, with category columns and NaN, with and without a
hold-out; training's figures are those of the code before; no row is walked through the
trees after the fit (but regression's curve); the artifact is the same bytes; and what
cannot be read or does not check out falls back to asking the model."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from ensembles import evaluation, metrics
from ensembles.data import select_training_data, table_from_frame
from ensembles.kinds import lightgbm_kind, lightgbm_scores
from ensembles.kinds.boosting_library import Keep
from ensembles.parallel import MemberPool
from ensembles.specs import parse_estimator_spec
from ensembles.training import _fit, _split
from ensembles.training_run import Run
from ensembles.validation import resolve_ensemble
from tests.unit.booster_walks import walked_rounds

RS = 5
TASKS = ["binary", "multiclass", "regression"]


def _table(task: str, n: int = 1500) -> pd.DataFrame:
    """Numbers with NaN, a category column with rare values and missing ones, another
    with few values, and a target that reads them."""
    r = np.random.default_rng(11)
    table = pd.DataFrame({f"x{i}": r.normal(size=n) for i in range(4)})
    table.loc[r.random(n) < 0.15, "x0"] = np.nan
    table["x3"] = table["x3"].round(1)  # values on the splits' thresholds
    rare = np.array(["a", "b", "c", "d", "e", "f", "g", "h", None], dtype=object)
    table["shop"] = rare[np.minimum(r.zipf(1.7, n) - 1, 8)]
    table["colour"] = np.array(["red", "green", "blue"])[r.integers(0, 3, n)]
    z = table["x1"] + np.nan_to_num(table["x0"]) + (table["shop"] == "b") + r.normal(size=n)
    if task == "binary":
        table["target"] = np.where(z > 0.3, "yes", "no")
    elif task == "multiclass":
        table["target"] = np.array(["low", "mid", "high", "top"])[np.digitize(z, [-1, 0.5, 1.5])]
    else:
        table["target"] = z
    return table


def _fitted(task: str, holdout: float, params: dict[str, Any] | None = None) -> Any:
    data = select_training_data(table_from_frame(_table(task)), "target")
    raw = {"kind": "lightgbm", "params": {"n_estimators": 70, "num_leaves": 15} | (params or {})}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    notes: list[str] = []
    rows = _split(data, holdout, RS, notes)
    run = Run(None, None, MemberPool.local())
    return _fit(data, spec, rows, RS, run, notes), rows, run


def _library(fit: Any, X: Any) -> Any:
    return fit.ensemble.predict(X) if fit.task == "regression" else fit.ensemble.predict_proba(X)


@pytest.mark.parametrize("holdout", [0.0, 0.25])
@pytest.mark.parametrize("task", TASKS)
def test_the_fit_keeps_lightgbms_own_answers(task: str, holdout: float) -> None:
    fit, rows, _ = _fitted(task, holdout)
    kept = fit.rounds.answers
    assert kept is not None
    assert np.array_equal(kept.train, _library(fit, fit.Xt))  # the same bits, every row
    Xbt = fit.Xt
    if holdout:
        assert fit.Xht is not None and kept.held is not None
        assert np.array_equal(fit.Xht, fit.pipeline[:-1].transform(rows.X_hold), equal_nan=True)
        assert np.array_equal(kept.held, _library(fit, fit.Xht))
        Xbt = fit.Xht
    else:
        assert kept.held is None
    marks = metrics.checkpoints(lightgbm_kind.rounds_kept(fit.ensemble))
    assert kept.marks == marks
    if task == "regression":
        assert kept.staged is None  # its curve needs predict_at's own sums
        return
    assert kept.staged is not None
    before = lightgbm_kind.predict_at(fit.ensemble, Xbt, marks)
    for new, old in zip(kept.staged, before, strict=True):
        np.testing.assert_array_equal(new, old)


def _each_figure(fit: Any, rows: Any) -> dict[str, Any]:
    """The figures as the code before made them: each from its own predictions."""
    task, pipeline, classes = fit.task, fit.pipeline, fit.classes
    held = rows.X_hold is not None
    Xb, yb = (rows.X_hold, rows.y_hold) if held else (rows.X_train, rows.y_train)
    Xbt = np.asarray(pipeline[:-1].transform(Xb))
    out = {
        "train": evaluation._evaluate(pipeline, rows.X_train, rows.y_train, task, classes),
        "curve": metrics.staged_curve(fit.ensemble, Xbt, yb, task, fit.kind.stages),
    }
    if held:
        out["holdout"] = evaluation._evaluate(pipeline, rows.X_hold, rows.y_hold, task, classes)
    if task == "regression":
        basis = "holdout" if held else "train"
        out["pairs"] = metrics.prediction_pairs(yb, pipeline.predict(Xb), basis, RS)
    return out


@pytest.mark.parametrize("holdout", [0.0, 0.25])
@pytest.mark.parametrize("task", TASKS)
def test_training_figures_are_the_figures_before(task: str, holdout: float) -> None:
    """Exactly (the same floats): the scores, the curve, the predicted-vs-actual pairs."""
    fit, rows, run = _fitted(task, holdout)
    assert fit.rounds.answers is not None
    with run.predicting():
        scores = evaluation.score_fit(fit, rows, RS, [])
        before = _each_figure(fit, rows)
    assert scores.on_train == before["train"]
    assert scores.holdout == before.get("holdout")
    assert scores.curve is not None and scores.curve["points"] == before["curve"]
    if "pairs" in before:
        assert scores.extra["predicted_vs_actual"] == before["pairs"]


@pytest.mark.parametrize("holdout", [0.0, 0.25])
@pytest.mark.parametrize("task", TASKS)
def test_no_row_is_walked_after_the_fit(task: str, holdout: float) -> None:
    """Fails on the code before: it walked the curve's rows through every round (and,
    with a hold-out, the training rows too).  Regression's curve still walks its rows."""
    fit, rows, run = _fitted(task, holdout)
    rounds = lightgbm_kind.rounds_kept(fit.ensemble)
    scored = len(rows.y_train) if rows.y_hold is None else len(rows.y_hold)
    with walked_rounds(fit.ensemble) as walked, run.predicting():
        evaluation.score_fit(fit, rows, RS, [])
    assert walked[0] == (rounds * scored if task == "regression" else 0)


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_rows_near_a_tie_are_answered_by_lightgbm(
    task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row counted as near a tie: LightGBM answers them all, the same labels."""
    monkeypatch.setattr(lightgbm_scores, "NEAR", 1.0)
    fit, _, _ = _fitted(task, 0.25)
    kept = fit.rounds.answers
    assert kept is not None and kept.staged is not None
    exact = lightgbm_kind.predict_at(fit.ensemble, fit.Xht, kept.marks)
    for new, old in zip(kept.staged, exact, strict=True):
        np.testing.assert_array_equal(new, old)


@pytest.mark.parametrize("near", [lightgbm_scores.NEAR, 1.0])
@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_the_staged_codes_are_the_labels_positions(
    task: str, near: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With rows near a tie too (NEAR 1.0: every row, answered by LightGBM)."""
    monkeypatch.setattr(lightgbm_scores, "NEAR", near)
    fit, _, _ = _fitted(task, 0.25)
    kept = fit.rounds.answers
    assert kept is not None and kept.staged is not None and kept.staged_codes is not None
    classes = np.asarray(fit.ensemble.classes_)
    for labels, codes in zip(kept.staged, kept.staged_codes, strict=True):
        np.testing.assert_array_equal(classes.take(codes), labels)


@pytest.mark.parametrize("holdout", [0.0, 0.25])
@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_the_curve_counts_its_hits_on_the_codes(
    task: str, holdout: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails on the code before: it compared each mark's label objects class by class
    (``metrics._hits``: 0.57 s of CPU for 50 marks of 200,000 rows).  The same curve."""
    fit, rows, run = _fitted(task, holdout)
    with run.predicting():
        before = _each_figure(fit, rows)["curve"]

    def no_label_comparison(*_args: Any) -> int:
        raise AssertionError("the curve compared label objects")

    monkeypatch.setattr(metrics, "_hits", no_label_comparison)
    with run.predicting():
        scores = evaluation.score_fit(fit, rows, RS, [])
    assert scores.curve is not None and scores.curve["points"] == before


def test_a_rounding_bound_wider_than_near_leaves_the_curve_to_lightgbm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lightgbm_scores, "NEAR", 0.0)
    fit, rows, run = _fitted("binary", 0.0)
    kept = fit.rounds.answers
    assert kept is not None and kept.staged is None
    with run.predicting():
        scores = evaluation.score_fit(fit, rows, RS, [])
        before = _each_figure(fit, rows)
    assert scores.curve is not None and scores.curve["points"] == before["curve"]
    assert scores.on_train == before["train"]


def test_a_difference_in_the_sample_keeps_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read off by one bit on one checked row: nothing kept, figures as before."""
    own = lightgbm_scores._scores

    def off(booster: Any, data: int, rows: int) -> Any:
        out = own(booster, data, rows)
        out[0] = np.nextafter(out[0], 2.0)
        return out

    monkeypatch.setattr(lightgbm_scores, "_scores", off)
    fit, rows, run = _fitted("binary", 0.0)
    assert fit.rounds.answers is None
    with run.predicting():
        scores = evaluation.score_fit(fit, rows, RS, [])
        before = _each_figure(fit, rows)
    assert scores.on_train == before["train"]
    assert scores.curve is not None and scores.curve["points"] == before["curve"]


def test_early_stopping_keeps_nothing() -> None:
    params = {"n_estimators": 300, "early_stopping_rounds": 3, "learning_rate": 0.5}
    fit, _, _ = _fitted("binary", 0.25, params)
    assert lightgbm_kind.rounds_kept(fit.ensemble) < 300
    assert fit.rounds.answers is None


@pytest.mark.filterwarnings("ignore::UserWarning")  # categorical_feature in its params
@pytest.mark.parametrize("task", TASKS)
def test_the_artifact_is_the_same_bytes(task: str) -> None:
    """Reading the scores (the hold-out added through the C API) leaves nothing in the
    fitted estimator: pickled, it is byte for byte the one fitted without it."""
    fit, _, _ = _fitted(task, 0.25)
    X, held = fit.Xt, fit.Xht
    y = np.asarray(fit.pipeline[-1].predict(X))  # any labels of the right kind
    plain, watched = clone(fit.ensemble), clone(fit.ensemble)
    params = dict(fit.spec.params)
    report = lightgbm_kind.fit_rounds(plain, X, y, params, 2, None)
    keep = Keep(held, metrics.checkpoints(int(plain.n_estimators)))
    kept = lightgbm_kind.fit_rounds(watched, X, y, params, 2, None, keep)
    assert report.answers is None and kept.answers is not None
    assert pickle.dumps(watched) == pickle.dumps(plain)
    assert dataclasses.replace(kept, answers=None) == report


def test_ties_and_nan_are_near() -> None:
    """Binary: p > 0.5 is the label, |p - 0.5| <= NEAR or NaN near; multiclass: the first
    largest, the two largest within NEAR of each other or NaN near."""
    codes, near = lightgbm_scores._codes(np.array([0.2, 0.5, 0.5 + 1e-7, 0.9, np.nan]))
    assert codes.tolist() == [0, 0, 1, 1, 0] and near.tolist() == [1, 2, 4]
    scores = np.array([[0.3, 0.3, 0.4], [0.5, 0.5, 0.0], [np.nan] * 3, [0.1, 0.2, 0.7]])
    codes, near = lightgbm_scores._codes(scores)
    assert codes.tolist() == [2, 0, 0, 2] and near.tolist() == [1, 2]


@pytest.mark.parametrize("task", TASKS)
def test_predict_at_is_the_estimators_own_staged_raw_scores(task: str) -> None:
    """``predict_at`` asks the booster as the scikit-learn class does (the same bits as
    ``estimator.predict(raw_score=True, start_iteration, num_iteration)`` summed between
    marks), on few rows (one thread) and on many (the estimator's threads)."""
    fit, _, _ = _fitted(task, 0.0)
    marks = metrics.checkpoints(lightgbm_kind.rounds_kept(fit.ensemble))
    for X in (fit.Xt[:7], fit.Xt):
        raw, before = None, []
        for start, mark in zip([0, *marks], marks, strict=False):
            chunk = fit.ensemble.predict(
                X, raw_score=True, start_iteration=start, num_iteration=mark - start
            )
            raw = chunk if raw is None else raw + chunk
            before.append(lightgbm_kind._labels(fit.ensemble, raw))
        for new, old in zip(lightgbm_kind.predict_at(fit.ensemble, X, marks), before, strict=True):
            assert np.array_equal(new, old)


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_the_checks_ask_the_booster_in_one_staged_pass(
    task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails on the code before: the rows near a tie and the spread sample were each
    answered by a ``predict_at`` of their own, every mark through the scikit-learn class's
    ``predict`` (0.6-1.0 ms of parameter reads a call, 100 calls).  Now one ``predict_at``
    (every row near a tie here: NEAR 1.0), through the booster; the same labels."""
    monkeypatch.setattr(lightgbm_scores, "NEAR", 1.0)
    calls: list[int] = []
    own_predict_at = lightgbm_kind.predict_at

    def counted(estimator: Any, X: Any, marks: list[int]) -> list[Any]:
        calls.append(len(X))
        return own_predict_at(estimator, X, marks)

    monkeypatch.setattr(lightgbm_kind, "predict_at", counted)
    fit, rows, _ = _fitted(task, 0.25)
    kept = fit.rounds.answers
    assert kept is not None and kept.staged is not None and kept.staged_codes is not None
    assert calls == [len(rows.y_hold)]  # every hold-out row near a tie: asked once
    classes = np.asarray(fit.ensemble.classes_)
    labels = type(fit.ensemble).predict
    monkeypatch.setattr(
        type(fit.ensemble), "predict", lambda *a, **k: pytest.fail("asked the class")
    )
    exact = own_predict_at(fit.ensemble, fit.Xht, kept.marks)
    monkeypatch.setattr(type(fit.ensemble), "predict", labels)
    for codes, old in zip(kept.staged_codes, exact, strict=True):
        np.testing.assert_array_equal(classes.take(codes), old)


def test_the_staged_labels_are_made_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on the code before: the 50 label arrays of the curve's rows were made from
    their codes after every fit (0.12-0.15 s of CPU on 200,000 rows) though the curve
    counts its hits on the codes.  They are still there, the same, for whoever asks."""
    fit, rows, run = _fitted("binary", 0.0)
    kept = fit.rounds.answers
    assert kept is not None and isinstance(kept.staged, lightgbm_scores.StagedLabels)
    made: list[int] = []
    own = lightgbm_scores.StagedLabels.__getitem__

    def counted(self: Any, index: Any) -> Any:
        made.append(index)
        return own(self, index)

    monkeypatch.setattr(lightgbm_scores.StagedLabels, "__getitem__", counted)
    with run.predicting():
        scores = evaluation.score_fit(fit, rows, RS, [])
    assert made == [] and scores.curve is not None
    monkeypatch.setattr(lightgbm_scores.StagedLabels, "__getitem__", own)
    classes = np.asarray(fit.ensemble.classes_)
    assert len(kept.staged) == len(kept.marks)
    for at, codes in enumerate(kept.staged_codes or []):
        np.testing.assert_array_equal(kept.staged[at], classes.take(codes))
    assert [a.tolist() for a in kept.staged[1:3]] == [
        classes.take(c).tolist() for c in (kept.staged_codes or [])[1:3]
    ]


@pytest.mark.parametrize("holdout", [0.0, 0.25])
@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_the_checks_copy_only_the_rows_they_ask(
    monkeypatch: pytest.MonkeyPatch, task: str, holdout: float
) -> None:
    """The answers are checked on a spread sample: only those rows are made contiguous
    (a contiguous copy of every row first was 0.05 s of a 200,000-row job's critical
    path, twice the same matrix), and what is kept is the same."""
    real = np.ascontiguousarray
    copied: list[int] = []

    def spy(a: Any, *args: Any, **kwargs: Any) -> Any:
        copied.append(int(np.shape(a)[0]) if np.ndim(a) else 0)
        return real(a, *args, **kwargs)

    answers = lightgbm_scores.ScoreWatch.answers

    def spied(self: Any, estimator: Any, X: Any) -> Any:
        monkeypatch.setattr(np, "ascontiguousarray", spy)
        try:
            return answers(self, estimator, X)
        finally:
            monkeypatch.setattr(np, "ascontiguousarray", real)

    monkeypatch.setattr(lightgbm_scores.ScoreWatch, "answers", spied)
    fit, _, _ = _fitted(task, holdout)
    assert fit.rounds.answers is not None
    assert np.array_equal(fit.rounds.answers.train, _library(fit, fit.Xt))
    assert copied and max(copied) <= 2 * lightgbm_scores.CHECK_ROWS < len(fit.Xt)
