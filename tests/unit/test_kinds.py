"""Every catalog kind, for each task: trained, predicted, served as its pipeline answers.

The specs come from the shared table in ``tests/kinds.py``; the first test fails when a
kind of the catalog has no entry there, so a new kind is covered by adding its entry.
The traits of each kind are checked against its own parameters and classes here too.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest

from ensembles import prepare
from ensembles.catalog import ENSEMBLE_KINDS, KINDS, Kind
from ensembles.inference import inference_verdict
from ensembles.members import predicted_labels
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.tasks import Task
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.kinds import SPECS, cases
from tests.unit.datasets import training_data

RS = 7
DATASET = {"classification": "wine", "regression": "diabetes"}
HOLDOUT = EvaluationSpec(holdout_fraction=0.25, cv_folds=0)
CLASS_TRAITS = ("votes", "members", "growth", "oob", "curve", "native_missing")


def test_the_table_has_an_entry_for_every_kind_and_task_of_the_catalog() -> None:
    assert set(SPECS) == {(kind.name, task) for kind in KINDS.values() for task in kind.tasks}
    assert {kind for kind, _ in SPECS if KINDS[kind].family == "ensemble"} == {
        k.name for k in ENSEMBLE_KINDS
    }


def fit(kind: str, task: Task) -> FittedModel:
    data = training_data(DATASET[task])
    spec = resolve_ensemble(parse_estimator_spec(SPECS[(kind, task)]), task)
    return train(data, spec, HOLDOUT, RS)


@cache
def fitted(kind: str, task: Task) -> FittedModel:
    return fit(kind, task)


@pytest.mark.parametrize(("kind", "task"), cases())
def test_every_kind_trains_predicts_and_is_deterministic(kind: str, task: Task) -> None:
    data = training_data(DATASET[task])
    first = fitted(kind, task)
    second = fit(kind, task)
    pred = predicted_labels(first.pipeline, data.X)  # CatBoost's multiclass: a column
    assert pred.shape == (len(data.y),)
    np.testing.assert_array_equal(pred, predicted_labels(second.pipeline, data.X))
    assert first.signature.task == task
    holdout = first.metrics.holdout
    assert holdout["n"] == round(len(data.y) * 0.25) or abs(holdout["n"] - len(data.y) * 0.25) < 1
    if task == "classification":
        assert first.signature.classes == data.classes
        assert holdout["accuracy"] > 0.5
        assert len(holdout["confusion_matrix"]) == len(data.classes or ())
    else:
        assert holdout["r2"] is not None and holdout["r2"] > 0.0
    assert first.metrics == second.metrics


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(("kind", "task"), cases())
def test_every_kind_is_served_with_its_pipelines_answers(kind: str, task: Task) -> None:
    """The servable form (compiled where the fidelity check admitted an engine):
    labels identical, probabilities or values within 1e-9 of the stored pipeline."""
    model = fitted(kind, task)
    inference = inference_verdict(model.pipeline, task, model.train_rows, RS)
    assert inference["ok"] or inference["reason"]  # compiled, or why not
    servable = prepare(model.pipeline, model.signature, inference)
    X = training_data(DATASET[task]).X
    columns = {c: X[c].to_numpy() for c in X.columns}
    proba = task == "classification" and hasattr(model.pipeline, "predict_proba")
    answer = servable.answer(columns, with_proba=proba)
    expected = predicted_labels(model.pipeline, X)
    if task == "classification":
        np.testing.assert_array_equal(answer.predictions, expected)
    else:
        np.testing.assert_allclose(answer.predictions, expected, rtol=0, atol=1e-9)
    if proba:
        np.testing.assert_allclose(
            answer.probabilities, model.pipeline.predict_proba(X), rtol=0, atol=1e-9
        )


# --- the traits against each kind's own parameters and classes -------------------------


@pytest.mark.parametrize("kind", [pytest.param(k, id=k.name) for k in KINDS.values()])
def test_traits_name_the_kinds_own_parameters_and_slots(kind: Kind) -> None:
    names = {p.name for p in kind.params} | set(kind.fixed)
    for param in (kind.size_param, kind.voting_param, kind.calibrate_param, kind.rows_param):
        assert param is None or param in names
    assert kind.tuple_params <= names
    for need in kind.member_needs:
        assert need.slot in kind.slots
        assert need.when is None or need.when[0] in names
    assert kind.voting_param is None or kind.votes
    assert kind.native_categorical <= kind.native_missing  # ordinal codes carry NaN
    slots_filled = {
        "estimator": kind.default_estimator,
        "final_estimator": kind.default_final_estimator,
    }
    for slot, defaults in slots_filled.items():
        assert set(defaults) == (set(kind.tasks) if slot in kind.slots else set())
        for task, spec in defaults.items():
            assert task in KINDS[spec.kind].tasks


def test_kinds_of_one_class_share_its_traits() -> None:
    """Traits read from a fitted estimator's class (member walks) cannot tell apart kinds
    that share a class, so such kinds must agree on them."""
    by_class: dict[type, Kind] = {}
    for kind in KINDS.values():
        for cls in kind.classes.values():
            first = by_class.setdefault(cls, kind)
            for trait in CLASS_TRAITS:
                assert getattr(kind, trait) == getattr(first, trait), (kind.name, trait)


def test_the_default_members_resolve() -> None:
    for kind in ENSEMBLE_KINDS:
        for task in kind.tasks:
            raw: dict[str, Any] = {"kind": kind.name}
            if "estimators" in kind.slots:
                raw["estimators"] = [{"name": "tree", "kind": "decision_tree"}]
            resolved = resolve_ensemble(parse_estimator_spec(raw), task)
            if "estimator" in kind.slots:
                assert resolved.estimator is not None
                assert resolved.estimator.kind == kind.default_estimator[task].kind
