"""Notes say what was skipped for *this* model (issue 20): a measure no fit of a kind ever
has (AdaBoost's hardest rows on a forest, out-of-fold scores on bagging, OOB on voting)
gets no note; one the kind has but this fit skipped keeps its note, with what to change."""

from __future__ import annotations

from functools import cache

import pytest

from ensembles.catalog import KINDS
from ensembles.reports import Metrics
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.tasks import Task
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.kinds import SPECS, cases
from tests.unit.datasets import training_data

HOLDOUT = EvaluationSpec(holdout_fraction=0.25, cv_folds=0)
DATASET = {"classification": "wine", "regression": "diabetes"}
NEVER_WORDS = ("predictors of their own", "do not predict the target", "member curve")


@cache
def _metrics(kind: str, task: Task, cv_folds: int = 0) -> Metrics:
    data = training_data(DATASET[task])
    spec = resolve_ensemble(parse_estimator_spec(SPECS[(kind, task)]), task)
    return train(data, spec, EvaluationSpec(holdout_fraction=0.25, cv_folds=cv_folds), 7).metrics


def _about(notes: list[str], prefix: str) -> list[str]:
    return [n for n in notes if n.startswith(prefix)]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(("kind", "task"), cases("ensemble"))
def test_no_note_about_a_measure_the_kind_never_has(kind: str, task: Task) -> None:
    metrics = _metrics(kind, task)
    trained = SPECS[(kind, task)]["kind"]  # an entry may train its kind as a member
    traits = KINDS[trained]
    notes = metrics.notes
    if traits.hardest_rows is None:
        assert metrics.hardest_rows is None and not _about(notes, "no hardest rows"), notes
    if not traits.predicts_out_of_fold:
        assert metrics.oof is None and not _about(notes, "no out-of-fold"), notes
    if not traits.leaves_rows_out:
        assert metrics.oob is None and not _about(notes, "no OOB"), notes
    if metrics.curve is None:
        assert not _about(notes, "no score curve") or traits.leaves_rows_out, notes
    assert not [n for n in notes if any(w in n for w in NEVER_WORDS)], notes
    assert "no cross-validation (cv_folds = 0)" in notes  # asked for none: still said


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_voting_says_how_to_get_out_of_fold_scores_until_it_has_them(task: Task) -> None:
    """Voting predicts out of fold only with evaluation.cv_folds: without it, the note is
    the one thing that tells a user the measure exists for this kind and how to get it."""
    without = _metrics("voting", task)
    assert without.oof is None
    (note,) = _about(without.notes, "no out-of-fold scores")
    assert "evaluation.cv_folds" in note
    folded = _metrics("voting", task, cv_folds=3)
    assert folded.oof is not None and not _about(folded.notes, "no out-of-fold")
    stacking = _metrics("stacking", task)  # always out of fold: never a note
    assert stacking.oof is not None and not _about(stacking.notes, "no out-of-fold")


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (  # gradient boosting has an OOB loss when it subsamples; this one does not
            {"kind": "gradient_boosting", "params": {"n_estimators": 5, "subsample": 1.0}},
            "no OOB estimate: gradient boosting leaves no rows out (subsample = 1)",
        ),
        (  # one member: diversity applies to the kind, this fit has nothing to compare
            {"kind": "bagging", "params": {"n_estimators": 1}},
            "no diversity: fewer than two members",
        ),
    ],
)
def test_a_measure_the_kind_has_but_this_fit_skipped_keeps_its_note(
    raw: dict[str, object], says: str
) -> None:
    data = training_data("wine")
    spec = resolve_ensemble(parse_estimator_spec(raw), "classification")
    notes = train(data, spec, HOLDOUT, 7).metrics.notes
    assert any(n.startswith(says) for n in notes), notes
