"""Kinds carry their behaviour: every consumer asks the kind, nobody switches on its class.

A new kind touches its catalog entry, its module and its line in ``tests/kinds.py``: the
first test fails as soon as a module outside the catalog and ``ensembles/kinds/`` refers
to a kind's class other than to build one (an ``isinstance`` switch, a
class tuple, a class-keyed table).  The others hold every kind to answering every trait
question, kinds fitted as one class to answering alike, and the fitted traits to what
scikit-learn really does.
"""

from __future__ import annotations

import ast
import typing
from dataclasses import fields
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from ensembles.catalog import KINDS, Kind, kind_of
from ensembles.catalog.traits import Combination, Compiled, LabelRule
from ensembles.members import member_probabilities, member_values, members_of
from ensembles.plots import PLOTS
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.tasks import Task
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.kinds import SPECS
from tests.unit.datasets import training_data

ROOT = Path(__file__).resolve().parents[2]
# Where a kind's knowledge lives: the catalog entries and the kinds' own modules.
KIND_HOMES = (ROOT / "ensembles" / "catalog", ROOT / "ensembles" / "kinds")
FITTED_TRAITS = (
    "combination",
    "labels",
    "compiled",
    "compiled_by_task",
    "continuous",
    "hardest_rows",
    "stop_note",
    "votes",
    "explain",
    "explain_space",
)
DATASET = {"classification": "wine", "regression": "diabetes"}


# The classes of the catalog's kinds (and of what the own kinds become).
CATALOG_CLASSES = frozenset(
    cls.__name__ for k in KINDS.values() for cls in (*k.classes.values(), *k.becomes.values())
)


def _is_library(module: str) -> bool:
    return module == "sklearn" or module.startswith(("sklearn.", "ensembles.kinds"))


def class_switches(source: str) -> list[str]:
    """Every use of a catalog kind's class in ``source`` other than calling it."""
    tree = ast.parse(source)
    classes: set[str] = set()
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _is_library(node.module or ""):
            for alias in node.names:
                if alias.name in CATALOG_CLASSES:
                    classes.add(alias.asname or alias.name)
                else:  # perhaps a module (``from sklearn import ensemble``)
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if _is_library(a.name)}
    # Building one is fine: it is not a question about an estimator's kind.
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Name) and node.id in classes:
            name = node.id
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in CATALOG_CLASSES
            and ast.unparse(node.value) in modules
        ):
            name = node.attr
        if name is not None and id(node) not in called:
            found.append(f"line {node.lineno}: {name}")
    return found


def _modules_outside_the_kinds() -> list[Path]:
    paths = [*(ROOT / "ensembles").rglob("*.py"), *(ROOT / "app").rglob("*.py")]
    return [p for p in paths if not any(p.is_relative_to(home) for home in KIND_HOMES)]


def test_the_check_finds_a_switch_on_an_ensemble_class() -> None:
    switch = (
        "from sklearn.ensemble import AdaBoostClassifier, VotingRegressor\n"
        "import sklearn.ensemble as ske\n"
        "from sklearn import linear_model\n"
        "SHAPES = (VotingRegressor,)\n"
        "NODES = {linear_model.Ridge: 1}\n"
        "def f(e):\n"
        "    built = AdaBoostClassifier(), linear_model.Ridge()\n"
        "    return isinstance(e, AdaBoostClassifier) or isinstance(e, ske.BaggingRegressor)\n"
    )
    assert sorted(class_switches(switch)) == [
        "line 4: VotingRegressor",
        "line 5: Ridge",
        "line 8: AdaBoostClassifier",
        "line 8: BaggingRegressor",
    ]


@pytest.mark.parametrize(
    "path", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in _modules_outside_the_kinds()]
)
def test_no_module_outside_the_catalog_switches_on_a_kinds_class(path: Path) -> None:
    assert class_switches(path.read_text()) == [], "ask kind_of(estimator) instead"


def _answers(trait: object) -> tuple[object, ...]:
    return typing.get_args(trait)


@pytest.mark.parametrize("kind", [pytest.param(k, id=k.name) for k in KINDS.values()])
def test_every_kind_answers_every_trait_question(kind: Kind) -> None:
    hints = typing.get_type_hints(Kind)
    for f in fields(Kind):
        literal = hints[f.name]
        if typing.get_origin(literal) is typing.Literal:
            assert getattr(kind, f.name) in _answers(literal), f.name
    assert kind.combination in _answers(Combination)
    assert kind.labels in _answers(LabelRule)
    assert {kind.compiled, *kind.compiled_by_task.values()} <= set(_answers(Compiled))
    assert set(kind.compiled_by_task) <= set(kind.tasks)
    assert kind.hardest_rows is None or callable(kind.hardest_rows)
    assert kind.stop_note is None or callable(kind.stop_note)
    assert set(kind.own_plots) <= set(PLOTS)
    if kind.family == "base":
        assert kind.combination == "none"
        assert kind.members == "none"
    else:
        assert kind.combination != "none"


def test_kinds_fitted_as_one_class_answer_alike() -> None:
    """``kind_of`` cannot tell apart kinds fitted as the same class (the bagging family;
    voting and the own kinds that become it), so they must agree on the fitted traits."""
    by_class: dict[type, Kind] = {}
    for kind in KINDS.values():
        for cls in (*kind.classes.values(), *kind.becomes.values()):
            first = by_class.setdefault(cls, kind)
            for trait in FITTED_TRAITS:
                assert getattr(kind, trait) == getattr(first, trait), (kind.name, trait)


@pytest.mark.parametrize("kind", [pytest.param(k, id=k.name) for k in KINDS.values()])
def test_kind_of_finds_the_kind_of_each_class(kind: Kind) -> None:
    for cls in (*kind.classes.values(), *kind.becomes.values()):
        found = kind_of(cls.__new__(cls))
        assert found is not None
        for trait in FITTED_TRAITS:
            assert getattr(found, trait) == getattr(kind, trait), (kind.name, trait)
    assert kind_of(BaseEstimator()) is None


# --- the fitted traits against scikit-learn's own answers ------------------------------


@cache
def _fitted(kind: str, task: Task) -> FittedModel:
    data = training_data(DATASET[task])
    spec = resolve_ensemble(parse_estimator_spec(SPECS[(kind, task)]), task)
    return train(data, spec, EvaluationSpec(holdout_fraction=0.25, cv_folds=0), 7)


ENSEMBLE_CASES = [
    pytest.param(name, task, id=f"{name}-{task}")
    for (name, task) in SPECS
    if KINDS[name].family == "ensemble"
]
CLASSIFIER_CASES = [case for case in ENSEMBLE_CASES if case.values[1] == "classification"]
# Boosting's stages add up in raw scores from a private initial score: not checked here.
SUMMED_ELSEWHERE = [case for case in ENSEMBLE_CASES if KINDS[case.values[0]].combination != "sum"]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(("name", "task"), CLASSIFIER_CASES)
def test_the_label_rule_is_how_scikit_learn_labels(name: str, task: Task) -> None:
    model = _fitted(name, task)
    ensemble = model.pipeline[-1]
    kind = kind_of(ensemble)
    assert kind is not None
    Xt = model.pipeline[0].transform(training_data(DATASET[task]).X)
    classes = np.asarray(ensemble.classes_)
    predicted = np.asarray(ensemble.predict(Xt))
    if kind.column_labels:  # CatBoost's multiclass predict: one column of labels
        predicted = predicted.reshape(len(predicted))
    if kind.labels == "argmax" or (kind.labels == "argmax_if_soft" and ensemble.voting == "soft"):
        expected = classes[np.argmax(ensemble.predict_proba(Xt), axis=1)]
    elif kind.labels in ("raw_ge", "raw_gt"):  # wine has three classes: the first maximum
        expected = classes[np.argmax(ensemble.decision_function(Xt), axis=1)]
    elif kind.labels == "stacked":
        stacked = ensemble.transform(Xt)
        expected = classes[np.asarray(ensemble.final_estimator_.predict(stacked))]
    else:
        return
    np.testing.assert_array_equal(predicted, expected)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(("name", "task"), SUMMED_ELSEWHERE)
def test_a_linear_kind_is_the_weighted_mean_of_its_members(name: str, task: Task) -> None:
    """What the explanations rely on: members' outputs, weighted, add up to the model's."""
    model = _fitted(name, task)
    ensemble = model.pipeline[-1]
    kind = kind_of(ensemble)
    assert kind is not None
    if not kind.combines_linearly(ensemble):
        return  # a hard vote, a weighted median, a final estimator: nothing to add up
    members = members_of(ensemble, with_samples=False)
    assert members, "a linear kind's members are enumerated"
    Xt = model.pipeline[0].transform(training_data(DATASET[task]).X)
    weights = np.asarray([m.weight for m in members])
    if task == "classification":
        n = len(ensemble.classes_)
        outputs = np.stack([member_probabilities(m, Xt, n) for m in members])
        got = ensemble.predict_proba(Xt)
    else:
        outputs = np.stack([member_values(m, Xt) for m in members])
        got = ensemble.predict(Xt)
    expected = np.tensordot(weights / weights.sum(), outputs, axes=1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(("name", "task"), ENSEMBLE_CASES)
def test_a_kind_has_feature_importances_where_it_says(name: str, task: Task) -> None:
    model = _fitted(name, task)
    assert (model.feature_importances is not None) == (KINDS[name].importances != "none")
