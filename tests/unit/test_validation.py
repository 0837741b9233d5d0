"""Specs are refused before any training, with every problem at its exact path."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from ensembles.catalog import (
    BASE_KINDS,
    ENSEMBLE_KINDS,
    KINDS,
    SERVICE_OWNED_PARAMS,
    catalog_document,
)
from ensembles.errors import SpecError
from ensembles.specs import SpecLimits, parse_estimator_spec, parse_training_spec
from ensembles.validation import fitted_members, resolve_ensemble

TREE = {"kind": "decision_tree"}


def problems(
    raw: dict[str, Any], task: str = "classification", limits: SpecLimits | None = None
) -> list[tuple[tuple[Any, ...], str]]:
    with pytest.raises(SpecError) as caught:
        resolve_ensemble(parse_estimator_spec(raw), task, limits)  # type: ignore[arg-type]
    return [(p.loc, p.msg) for p in caught.value.problems]


def locs(
    raw: dict[str, Any], task: str = "classification", limits: SpecLimits | None = None
) -> list[tuple[Any, ...]]:
    return [loc for loc, _ in problems(raw, task, limits)]


INVALID: list[Any] = [
    ("unknown kind", {"kind": "ngboost"}, "classification", [("ensemble", "kind")], "unknown kind"),
    (
        "base learner at the top",
        {"kind": "knn"},
        "classification",
        [("ensemble", "kind")],
        "base learner",
    ),
    (
        "unknown parameter",
        {"kind": "random_forest", "params": {"n_trees": 5}},
        "classification",
        [("ensemble", "params", "n_trees")],
        "unknown parameter 'n_trees'",
    ),
    (
        "out of bounds",
        {"kind": "random_forest", "params": {"n_estimators": 0}},
        "classification",
        [("ensemble", "params", "n_estimators")],
        ">= 1 and <= 5000",
    ),
    (
        "wrong type",
        {"kind": "bagging", "params": {"bootstrap_features": "yes"}},
        "regression",
        [("ensemble", "params", "bootstrap_features")],
        "must be boolean",
    ),
    (
        "bool is not an integer",
        {"kind": "adaboost", "params": {"n_estimators": True}},
        "classification",
        [("ensemble", "params", "n_estimators")],
        "must be an integer",
    ),
    (
        "service-owned parameter",
        {"kind": "random_forest", "params": {"n_jobs": 4, "random_state": 1}},
        "classification",
        [("ensemble", "params", "n_jobs"), ("ensemble", "params", "random_state")],
        "set by the service",
    ),
    (
        "parameter fixed by the kind",
        {"kind": "pasting", "params": {"bootstrap": True}},
        "classification",
        [("ensemble", "params", "bootstrap")],
        "fixes bootstrap=False",
    ),
    (
        "pasting draws fewer rows than all",
        {"kind": "pasting", "params": {"max_samples": 1.0}},
        "classification",
        [("ensemble", "params", "max_samples")],
        "< 1",
    ),
    (
        "nested member out of bounds",
        {
            "kind": "voting",
            "estimators": [
                {"name": "a", **TREE},
                {"name": "b", "kind": "random_forest", "params": {"n_estimators": 9000}},
            ],
        },
        "classification",
        [("ensemble", "estimators", 1, "params", "n_estimators")],
        "<= 5000",
    ),
    (
        "kind unfit for the task",
        {"kind": "bagging", "estimator": {"kind": "gaussian_nb"}},
        "regression",
        [("ensemble", "estimator", "kind")],
        "does not do regression",
    ),
    (
        "regression-only kind in classification",
        {"kind": "voting", "estimators": [{"name": "ols", "kind": "linear_regression"}]},
        "classification",
        [("ensemble", "estimators", 0, "kind")],
        "does not do classification",
    ),
    (
        "soft voting over a member without probabilities",
        {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [{"name": "t", **TREE}, {"name": "svm", "kind": "svm"}],
        },
        "classification",
        [("ensemble", "estimators", 1, "kind")],
        "no probabilities",
    ),
    (
        "stacking on predict_proba over a member without it",
        {
            "kind": "stacking",
            "params": {"stack_method": "predict_proba"},
            "estimators": [{"name": "r", "kind": "ridge"}, {"name": "t", **TREE}],
        },
        "classification",
        [("ensemble", "estimators", 0, "kind")],
        "has no predict_proba",
    ),
    (
        "adaboost over a member that cannot weight rows",
        {"kind": "adaboost", "estimator": {"kind": "knn"}},
        "regression",
        [("ensemble", "estimator", "kind")],
        "cannot weight rows",
    ),
    (
        "slot the kind does not take",
        {"kind": "random_forest", "estimator": TREE},
        "classification",
        [("ensemble", "estimator")],
        "takes no estimator",
    ),
    (
        "duplicate member names",
        {"kind": "voting", "estimators": [{"name": "a", **TREE}, {"name": "a", "kind": "knn"}]},
        "classification",
        [("ensemble", "estimators", 1, "name")],
        "used twice",
    ),
    (
        "member name that is a parameter",
        {"kind": "voting", "estimators": [{"name": "weights", **TREE}]},
        "regression",
        [("ensemble", "estimators", 0, "name")],
        "parameter name",
    ),
    (
        "weights of the wrong length",
        {
            "kind": "voting",
            "params": {"weights": [1, 2, 3]},
            "estimators": [{"name": "a", **TREE}, {"name": "b", **TREE}],
        },
        "classification",
        [("ensemble", "params", "weights")],
        "3 weights for 2 estimators",
    ),
    (
        "weights that are all zero",
        {
            "kind": "voting",
            "params": {"weights": [0, 0]},
            "estimators": [{"name": "a", **TREE}, {"name": "b", **TREE}],
        },
        "regression",
        [("ensemble", "params", "weights")],
        "at least one weight",
    ),
    (
        "voting without estimators",
        {"kind": "voting"},
        "classification",
        [("ensemble", "estimators")],
        "at least one",
    ),
    (
        "nesting too deep",
        {
            "kind": "bagging",
            "estimator": {
                "kind": "bagging",
                "estimator": {"kind": "bagging", "estimator": {"kind": "bagging"}},
            },
        },
        "classification",
        [("ensemble", "estimator", "estimator", "estimator", "kind")],
        "limit is 3",
    ),
    (
        "too many members in all",
        {
            "kind": "bagging",
            "params": {"n_estimators": 100},
            "estimator": {"kind": "random_forest", "params": {"n_estimators": 500}},
        },
        "regression",
        [("ensemble",)],
        "50000 estimators",
    ),
    (
        "scikit-learn's own parameter validation",
        {"kind": "gradient_boosting", "params": {"max_features": 0}},
        "classification",
        [("ensemble", "params", "max_features")],
        "must be",
    ),
]


@pytest.mark.parametrize(
    ("raw", "task", "expected", "fragment"), [pytest.param(*c[1:], id=c[0]) for c in INVALID]
)
def test_invalid_spec_is_refused_with_the_exact_path(
    raw: dict[str, Any], task: str, expected: list[Any], fragment: str
) -> None:
    found = problems(raw, task)
    assert [loc for loc, _ in found] == expected
    assert fragment in found[0][1]


def test_all_problems_are_reported_at_once() -> None:
    raw = {
        "kind": "voting",
        "params": {"voting": "loud"},
        "estimators": [
            {"name": "lr", "kind": "logistic_regression", "params": {"C": -1}},
            {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 0, "depth": 3}},
            {"name": "x", "kind": "nope"},
        ],
    }
    assert locs(raw) == [
        ("ensemble", "params", "voting"),
        ("ensemble", "estimators", 0, "params", "C"),
        ("ensemble", "estimators", 1, "params", "n_estimators"),
        ("ensemble", "estimators", 1, "params", "depth"),
        ("ensemble", "estimators", 2, "kind"),
    ]


def test_limits_are_settings() -> None:
    raw = {"kind": "voting", "estimators": [{"name": f"m{i}", **TREE} for i in range(4)]}
    assert locs(raw, limits=SpecLimits(max_members_per_level=3)) == [("ensemble", "estimators")]
    assert locs({"kind": "bagging"}, limits=SpecLimits(max_total_members=5)) == [("ensemble",)]


def test_structure_errors_come_with_paths() -> None:
    with pytest.raises(SpecError) as caught:
        parse_training_spec(
            {
                "target": "y",
                "ensemble": {"kind": "voting", "estimators": [{"kind": "knn"}]},
                "evaluation": {"holdout_fraction": 1.5},
            }
        )
    found = {p.loc for p in caught.value.problems}
    assert ("evaluation", "holdout_fraction") in found
    assert ("ensemble", "estimators", 0, "name") in found


def test_defaults_are_filled_in_at_every_level() -> None:
    spec = resolve_ensemble(
        parse_estimator_spec({"kind": "stacking", "estimators": [{"name": "t", **TREE}]}),
        "regression",
    )
    assert spec.params == {"cv": 5, "passthrough": False}
    assert spec.final_estimator is not None and spec.final_estimator.kind == "ridge"
    assert spec.final_estimator.params["alpha"] == 1.0
    assert spec.estimators is not None and spec.estimators[0].params["criterion"] == "squared_error"
    bag = resolve_ensemble(parse_estimator_spec({"kind": "bagging"}), "classification")
    assert bag.estimator is not None and bag.estimator.kind == "decision_tree"


def test_fitted_member_count_multiplies_through_nesting() -> None:
    spec = resolve_ensemble(
        parse_estimator_spec(
            {
                "kind": "bagging",
                "params": {"n_estimators": 4},
                "estimator": {"kind": "random_forest", "params": {"n_estimators": 10}},
            }
        ),
        "classification",
    )
    assert fitted_members(spec) == 40


# --- the catalog ---------------------------------------------------------------------

# Where a kind's default deliberately differs from its scikit-learn class's default.
OWN_DEFAULTS = {
    ("pasting", "max_samples"),
    ("random_patches", "max_samples"),
    ("random_patches", "max_features"),
    ("random_subspace", "max_features"),
    ("random_patches", "bootstrap"),
    ("mlp", "hidden_layer_sizes"),  # a JSON list for scikit-learn's tuple
    ("svm", "probability"),  # deprecated by scikit-learn 1.9: calibrated instead
    ("stacking", "cv"),  # scikit-learn's None means 5 folds; the catalog says so
}


@pytest.mark.parametrize(
    "kind", [pytest.param(k, id=k.name) for k in (*ENSEMBLE_KINDS, *BASE_KINDS)]
)
def test_catalog_matches_scikit_learn(kind: Any) -> None:
    if kind.library is not None:
        _library_kind_matches_its_library(kind)
        return
    for task, cls in kind.classes.items():
        signature = inspect.signature(cls.__init__).parameters
        for param in kind.params_for(task):
            assert param.name in signature, f"{cls.__name__} has no {param.name}"
            assert param.name not in SERVICE_OWNED_PARAMS
            sk_default = signature[param.name].default
            if (kind.name, param.name) not in OWN_DEFAULTS:
                assert param.default_for(task) == sk_default, (kind.name, task, param.name)
            assert param.accepts(param.default_for(task), task), (kind.name, param.name)
        for name in kind.fixed:
            assert name in signature


# Booster parameters a library takes through **kwargs, absent from its get_params().
BOOSTER_PARAMS = {("lightgbm", "alpha")}
# Reach the library only with the objective taking them (CatBoost: inside loss_function).
OBJECTIVE_PARAMS = {"quantile_alpha", "delta", "alpha"}


def _library_kind_matches_its_library(kind: Any) -> None:
    """A boosting library's kind: its parameters, as its constructor takes them (without
    those the service's fit reads), are the library's, with the library's defaults where
    the library states one (XGBoost leaves most unset: its own defaults apply)."""
    for task, cls in kind.classes.items():
        # CatBoost's get_params holds only what was set: its constructor names the rest.
        library = dict.fromkeys(inspect.signature(cls).parameters) | cls().get_params()
        defaults = {p.name: p.default_for(task) for p in kind.params_for(task)}
        built = kind.estimator_params(task, defaults)
        unset = {n for n, v in defaults.items() if v is None}  # the library's choice
        dropped = set(defaults) - set(built)
        assert dropped <= kind.top_level_params | unset | OBJECTIVE_PARAMS
        for name, value in built.items():
            if (kind.name, name) in BOOSTER_PARAMS:
                continue
            assert name in library, f"{cls.__name__} has no {name}"
            if library[name] is not None and name != "n_jobs":
                assert value == library[name], (kind.name, task, name)
        assert cls(**kind.fixed).get_params().items() >= kind.fixed.items()


def test_catalog_document_is_json_schema_for_every_kind_and_task() -> None:
    doc = catalog_document()
    assert {k["kind"] for k in doc["ensemble_kinds"]} == {k.name for k in ENSEMBLE_KINDS}
    assert {k["kind"] for k in doc["base_kinds"]} >= {
        "decision_tree",
        "logistic_regression",
        "linear_regression",
        "ridge",
        "knn",
        "svm",
        "gaussian_nb",
        "mlp",
    }
    rf = next(k for k in doc["ensemble_kinds"] if k["kind"] == "random_forest")
    schema = rf["params"]["classification"]["properties"]["n_estimators"]
    assert schema == {
        "type": "integer",
        "minimum": 1,
        "maximum": 5000,
        "default": 100,
        "description": "Number of trees.",
    }
    assert rf["params"]["regression"]["properties"]["max_features"]["default"] == 1.0
    assert KINDS["gaussian_nb"].tasks == ("classification",)
