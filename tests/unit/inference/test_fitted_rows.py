"""The engine check's training rows take the answers the fit kept (ensembles.inference.
fitted_rows): the library is asked for the probe rows only, the verdict is the one made
by asking it for every row, and the kept answers are what the compiled engine is held to."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.ensemble import GradientBoostingClassifier

from ensembles.engine_verdict import EngineVerdict
from ensembles.inference import ENGINE, compiling, inference_verdict
from ensembles.inference.engines import SKLEARN, Answer
from ensembles.inference.fitted_rows import FittedRows, own_answers
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

RS = 3
HOLDOUT = EvaluationSpec(holdout_fraction=0.2, cv_folds=0)
TIMED = ("compile_seconds", "check_seconds", "crossover_rows")
CASES = [("wine", "classification"), ("diabetes", "regression")]


def _asked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row counts the check asks the library for (its ``_own`` calls)."""
    counts: list[int] = []
    own = compiling._own

    def counted(compiled: Any, rows: NDArray[Any], with_proba: bool) -> Answer:
        counts.append(len(rows))
        return own(compiled, rows, with_proba)

    monkeypatch.setattr(compiling, "_own", counted)
    return counts


def _handed_over_first(
    monkeypatch: pytest.MonkeyPatch, hand_over: Callable[[NDArray[np.float64] | None], None]
) -> Callable[[NDArray[np.float64] | None], None]:
    """``train()``'s ``on_answers``: ``hand_over`` the fit's answers, the check's library
    calls held until then.  The check never waits for them (it asks the library when
    they are not there once the probe rows are answered), so on a loaded host the fit's
    end could come after its probe rows; held, the tests see the handed-over case."""
    handed = threading.Event()
    own = compiling._own

    def after_hand_over(compiled: Any, rows: NDArray[Any], with_proba: bool) -> Answer:
        handed.wait(timeout=120)
        return own(compiled, rows, with_proba)

    monkeypatch.setattr(compiling, "_own", after_hand_over)

    def on_answers(train: NDArray[np.float64] | None) -> None:
        hand_over(train)
        handed.set()

    return on_answers


def _train_beside(dataset: str, verdict: EngineVerdict, **kw: Any) -> FittedModel:
    data = training_data(dataset)
    spec = resolve_ensemble(
        parse_estimator_spec({"kind": "lightgbm", "params": {"n_estimators": 15}}), data.task
    )
    return train(data, spec, HOLDOUT, RS, pool=MemberPool.local(2), on_fitted=verdict.start, **kw)


@pytest.mark.parametrize("sampled", [False, True], ids=["every-row", "sampled"])
@pytest.mark.parametrize(("dataset", "task"), CASES, ids=[d for d, _ in CASES])
def test_the_check_asks_the_library_for_the_probe_rows_only(
    monkeypatch: pytest.MonkeyPatch, dataset: str, task: Any, sampled: bool
) -> None:
    if sampled:  # a seeded sample of the training rows, as on a big table
        monkeypatch.setattr(compiling, "MAX_CHECK_ROWS", 40)
    asked = _asked(monkeypatch)
    verdict = EngineVerdict(task, RS, 2)
    on_answers = _handed_over_first(monkeypatch, verdict.answered)
    fitted = _train_beside(dataset, verdict, on_answers=on_answers)
    beside = verdict.result()
    training_rows = min(len(fitted.train_rows), compiling.MAX_CHECK_ROWS)
    assert asked == [beside["n_rows_checked"] - training_rows]
    asked.clear()
    after = inference_verdict(fitted.pipeline, task, fitted.train_rows, RS, 2)
    assert asked == [after["n_rows_checked"]]  # not handed the answers: every row asked
    assert beside["engine"] == ENGINE
    assert {k: v for k, v in beside.items() if k not in TIMED} == {
        k: v for k, v in after.items() if k not in TIMED
    }


def test_the_compiled_engine_is_held_to_the_kept_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kept answers that are not the model's (here moved by 1e-6) fail the check."""
    verdict = EngineVerdict("classification", RS, 2)

    def moved(train: NDArray[np.float64] | None) -> None:
        assert train is not None
        verdict.answered(train + np.array([1e-6, -1e-6]))

    _train_beside("breast_cancer", verdict, on_answers=_handed_over_first(monkeypatch, moved))
    refused = verdict.result()
    assert refused["engine"] == SKLEARN
    assert "probabilities differ" in refused["reason"]


class _Library:
    """An estimator asked through ``ask``: counts the rows it is asked for."""

    def __init__(self, estimator: Any) -> None:
        self.estimator = estimator
        self.asked: list[int] = []

    def ask(self, rows: NDArray[Any]) -> Answer:
        self.asked.append(len(rows))
        proba = np.asarray(self.estimator.predict_proba(rows), dtype=np.float64)
        labels = np.asarray(self.estimator.predict(rows))
        return Answer(labels, proba, SKLEARN)


def _boosted() -> tuple[Any, NDArray[np.float64]]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.where(X[:, 0] > 0, "yes", "no")
    return GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y), X


@pytest.mark.parametrize(
    ("known", "expected"),
    [(None, [50, 40]), (np.zeros((7, 2)), [40, 50])],
    ids=["not-handed-over", "other-rows"],
)
def test_without_answers_for_these_rows_the_training_rows_are_asked(
    known: NDArray[np.float64] | None, expected: list[int]
) -> None:
    import lightgbm

    X = np.random.default_rng(1).normal(size=(90, 3))
    y = np.where(X[:, 1] > 0, "a", "b")
    model = lightgbm.LGBMClassifier(n_estimators=5, verbose=-1).fit(X, y)
    library = _Library(model)
    fitted = FittedRows(50, None, 50, lambda: known)
    answer = own_answers(model, "classification", X, fitted, library.ask)
    assert sorted(library.asked) == sorted(expected)
    np.testing.assert_array_equal(answer.predictions, model.predict(X))
    np.testing.assert_array_equal(answer.probabilities, model.predict_proba(X))


def test_a_classifier_not_deciding_by_its_probabilities_is_asked_for_every_row() -> None:
    """Gradient boosting decides on its raw scores (``raw >= 0``): labels made from kept
    probabilities could differ on a tie, so the kept answers are not used."""
    model, X = _boosted()
    library = _Library(model)
    kept = model.predict_proba(X)
    fitted = FittedRows(30, None, 60, lambda: kept)
    own_answers(model, "classification", X[:50], fitted, library.ask)
    assert library.asked == [50]
