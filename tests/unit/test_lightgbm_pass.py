"""LightGBM's staged curve and its rows' scores from one walk of the trees
(``ensembles.kinds.lightgbm_pass``): the staged answers are ``predict_at``'s and the final
ones ``predict_proba`` / ``predict``'s, bit for bit, for binary, multiclass and
regression, with and without early stopping; a link the walk does not reproduce falls
back to LightGBM's own answers; training's figures are those of the code before (each
figure from its own predictions) for every staged boosting kind; and the rows are walked
once, not twice."""

from __future__ import annotations

import dataclasses
from typing import Any

import lightgbm
import numpy as np
import pytest

from ensembles import evaluation, metrics
from ensembles.catalog import KINDS
from ensembles.data import select_training_data, table_from_frame
from ensembles.kinds import lightgbm_kind, lightgbm_pass
from ensembles.parallel import MemberPool
from ensembles.specs import parse_estimator_spec
from ensembles.training import _fit, _split
from ensembles.training_run import Run
from ensembles.validation import resolve_ensemble
from tests.unit.booster_walks import walked_rounds
from tests.unit.datasets import frame

RS = 3
STAGED = sorted(kind.name for kind in KINDS.values() if kind.curve == "stages")
TASKS = {"breast_cancer": "binary", "wine": "multiclass", "diabetes": "regression"}


def _table(name: str, labels: str) -> Any:
    table = frame(name)
    if labels == "strings" and name != "diabetes":
        table = table.assign(target=np.array(["no", "yes", "maybe"])[table["target"] % 3])
    return table


def _fitted(name: str, raw: dict[str, Any], holdout: float, labels: str = "integers") -> Any:
    data = select_training_data(table_from_frame(_table(name, labels)), "target")
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    notes: list[str] = []
    rows = _split(data, holdout, RS, notes)
    run = Run(None, None, MemberPool.local())
    return _fit(data, spec, rows, RS, run, notes), rows, run


def _lightgbm(name: str, stopping: bool, labels: str = "strings") -> Any:
    params: dict[str, Any] = {"n_estimators": 120, "num_leaves": 7}
    if stopping:
        params |= {"early_stopping_rounds": 5, "learning_rate": 0.5}
    return _fitted(name, {"kind": "lightgbm", "params": params}, 0.0, labels)


@pytest.mark.parametrize("stopping", [False, True])
@pytest.mark.parametrize("name", list(TASKS))
def test_one_walk_answers_as_predict_at_and_predict_proba(name: str, stopping: bool) -> None:
    if stopping and name == "wine":
        name = "digits"  # wine's 18 validation rows never stop it; digits' ten classes do
    fit, _, _ = _lightgbm(name, stopping)
    estimator, Xt = fit.ensemble, fit.Xt
    marks = metrics.checkpoints(lightgbm_kind.rounds_kept(estimator))
    if stopping:
        assert marks[-1] < estimator.n_estimators  # it stopped: the kept rounds only
    answers = lightgbm_pass.staged_answers(estimator, Xt, marks)
    assert answers.reproduced
    before = lightgbm_kind.predict_at(estimator, Xt, marks)
    assert len(answers.staged) == len(before)
    for new, old in zip(answers.staged, before, strict=True):
        np.testing.assert_array_equal(new, old)
    library = estimator.predict(Xt) if fit.task == "regression" else estimator.predict_proba(Xt)
    assert answers.final.dtype == np.float64 and answers.final.shape == np.shape(library)
    assert np.array_equal(answers.final, library)  # the same bits, not only close


def test_leaf_values_are_lightgbms_own() -> None:
    fit, _, _ = _lightgbm("wine", False)
    booster = fit.ensemble.booster_
    values = lightgbm_pass.leaf_values(booster)
    assert len(values) == booster.num_trees()
    for tree, leaves in enumerate(values):
        own = [booster.get_leaf_output(tree, leaf) for leaf in range(len(leaves))]
        assert leaves.tolist() == own


@pytest.mark.parametrize(
    ("name", "params"),
    [("breast_cancer", {"sigmoid": 2.0}), ("wine", {"objective": "multiclassova"})],
)
def test_a_link_not_reproduced_is_lightgbms_answer(name: str, params: dict[str, Any]) -> None:
    """A sigmoid of another scale, one-vs-all classes: LightGBM answers the final rows."""
    table = frame(name)
    X, y = table.drop(columns="target").to_numpy(), table["target"].to_numpy()
    model = lightgbm.LGBMClassifier(n_estimators=30, num_leaves=7, verbose=-1, **params)
    model.fit(X, y)
    marks = metrics.checkpoints(30)
    answers = lightgbm_pass.staged_answers(model, X, marks)
    assert not answers.reproduced
    assert np.array_equal(answers.final, model.predict_proba(X))
    for new, old in zip(answers.staged, lightgbm_kind.predict_at(model, X, marks), strict=True):
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
@pytest.mark.parametrize("name", list(TASKS))
@pytest.mark.parametrize("kind", STAGED)
def test_training_figures_are_the_figures_before(kind: str, name: str, holdout: float) -> None:
    """For every staged boosting kind (LightGBM through its one walk, the others as
    before): the scores, the curve and the predicted-vs-actual pairs equal the figures
    made each from its own predictions (exactly: JSON of the same floats)."""
    if name == "diabetes" and "regression" not in KINDS[kind].tasks:
        pytest.skip(f"{kind} does not regress")
    size = KINDS[kind].size_param
    params = {} if size is None else {size: 40}
    fit, rows, run = _fitted(name, {"kind": kind, "params": params}, holdout, "strings")
    with run.predicting():
        scores = evaluation.score_fit(fit, rows, RS, [])
        before = _each_figure(fit, rows)
    assert scores.on_train == before["train"]
    assert scores.holdout == before.get("holdout")
    assert scores.curve is not None and scores.curve["points"] == before["curve"]
    if "pairs" in before:
        assert scores.extra["predicted_vs_actual"] == before["pairs"]


@pytest.mark.parametrize("name", ["breast_cancer", "digits", "diabetes"])
def test_the_curves_rows_are_walked_once(name: str) -> None:
    """Fails on the code before: it walked the training rows through every kept round
    twice (``predict_proba`` for the scores, the chunks for the curve).  Without the
    answers the fit kept (test_lightgbm_scores: then no row is walked)."""
    fit, rows, run = _lightgbm(name, False)
    fit = dataclasses.replace(fit, rounds=dataclasses.replace(fit.rounds, answers=None))
    rounds = lightgbm_kind.rounds_kept(fit.ensemble)
    n = len(rows.y_train)
    with walked_rounds(fit.ensemble) as walked, run.predicting():
        evaluation.score_fit(fit, rows, RS, [])
    assert n > lightgbm_pass.CHECK_ROWS  # else the check's sample is every row
    assert walked[0] == rounds * (n + lightgbm_pass.CHECK_ROWS)
