"""One small, fast spec per catalog kind and task: the table every per-kind test uses.

An ensemble kind is trained as itself (XGBoost's classifier as bagging's member, where
the iris tests' string classes reach it encoded); a base learner, which cannot stand at the top, as
the member of a three-member bagging.  ``tests/unit/test_kinds.py`` fails when a kind of
the catalog has no entry here, so a kind added to the catalog is trained, predicted and
checked against its servable form by the parametrized tests as soon as it has one.
Members and sizes are chosen so that each model fits in well under a second and still
beats chance on wine (classification) and diabetes (regression).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import pytest

from ensembles.catalog import BASE_KINDS, KINDS
from ensembles.tasks import Task

Spec = dict[str, Any]
Family = Literal["ensemble", "base"]


def _members(task: Task) -> list[Spec]:
    linear = "logistic_regression" if task == "classification" else "ridge"
    return [
        {"name": "lin", "kind": linear},
        {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
        {"name": "knn", "kind": "knn"},
    ]


def _ensembles(task: Task) -> dict[str, Spec]:
    members = _members(task)
    voting = {"voting": "soft"} if task == "classification" else {}
    return {
        "voting": {"kind": "voting", "params": voting, "estimators": members},
        "bagging": {"kind": "bagging", "params": {"n_estimators": 6}},
        "pasting": {"kind": "pasting", "params": {"n_estimators": 6}},
        "random_subspace": {"kind": "random_subspace", "params": {"n_estimators": 6}},
        "random_patches": {"kind": "random_patches", "params": {"n_estimators": 6}},
        "adaboost": {"kind": "adaboost", "params": {"n_estimators": 8}},
        "gradient_boosting": {
            "kind": "gradient_boosting",
            "params": {"n_estimators": 12, "subsample": 0.8},  # subsampled: OOB losses too
        },
        "hist_gradient_boosting": {"kind": "hist_gradient_boosting", "params": {"max_iter": 12}},
        "random_forest": {"kind": "random_forest", "params": {"n_estimators": 10}},
        "extra_trees": {
            "kind": "extra_trees",
            "params": {"n_estimators": 10, "bootstrap": True},  # bootstrapped: OOB too
        },
        "stacking": {"kind": "stacking", "params": {"cv": 3}, "estimators": members[1:]},
        "pasting_votes": {
            "kind": "pasting_votes",
            "params": {"bite_size": 40, "max_estimators": 12, "patience": 5},
        },
        "ensemble_selection": {
            "kind": "ensemble_selection",
            "params": {"cv": 3, "max_steps": 6},
            "estimators": members,
        },
        "adaboost_mh": {"kind": "adaboost_mh", "params": {"n_estimators": 20}},
        "xgboost": {"kind": "xgboost", "params": {"n_estimators": 12, "max_depth": 3}},
        "lightgbm": {
            "kind": "lightgbm",
            "params": {"n_estimators": 12, "num_leaves": 7, "min_child_samples": 5},
        },
        "catboost": {"kind": "catboost", "params": {"iterations": 12, "depth": 3}},
    }


# Base learners' own parameters where their defaults would not beat chance here.
_BASE_PARAMS: Mapping[tuple[str, Task], Spec] = {
    ("mlp", "classification"): {
        "hidden_layer_sizes": [16],
        "learning_rate_init": 0.01,
        "max_iter": 300,
    },
    ("mlp", "regression"): {
        "hidden_layer_sizes": [16],
        "solver": "lbfgs",
        "alpha": 1.0,
        "max_iter": 500,
    },
}
# Every base kind of the catalog, trained as the member of a small bagging.
_BASES: tuple[str, ...] = tuple(kind.name for kind in BASE_KINDS)


def _in_bagging(kind: str, task: Task) -> Spec:
    member = {"kind": kind, "params": _BASE_PARAMS.get((kind, task), {})}
    return {"kind": "bagging", "params": {"n_estimators": 3}, "estimator": member}


TASKS: tuple[Task, ...] = ("classification", "regression")
SPECS: Mapping[tuple[str, Task], Spec] = {
    **{
        (kind, task): spec
        for task in TASKS
        for kind, spec in _ensembles(task).items()
        if task in KINDS[kind].tasks  # adaboost_mh: classification only
    },
    **{(kind, task): _in_bagging(kind, task) for kind in _BASES for task in KINDS[kind].tasks},
}


def entries(family: Family | None = None) -> list[tuple[str, Task]]:
    """The (kind, task) of every entry, or of the kinds of one family, in table order."""
    return [(kind, task) for kind, task in SPECS if family in (None, KINDS[kind].family)]


def cases(family: Family | None = None) -> list[Any]:
    """``pytest.param(kind, task)`` for :func:`entries`, with readable ids (kind-task)."""
    return [pytest.param(kind, task, id=f"{kind}-{task}") for kind, task in entries(family)]
