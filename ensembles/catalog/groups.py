"""Parameter groups, member needs and entry makers shared by several kinds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sklearn import ensemble as sk_ensemble

from ensembles.catalog.params import (
    BOOL,
    MAX_N_ESTIMATORS,
    NULL,
    Choice,
    Int,
    Num,
    P,
    Param,
)
from ensembles.catalog.traits import Kind, MemberNeed
from ensembles.kinds.selection import METRICS as SELECTION_METRICS
from ensembles.specs import EstimatorSpec
from ensembles.tasks import TASKS, Task

N_EST = Int(1, MAX_N_ESTIMATORS)
FRACTION_OR_COUNT = (Num(0, 1, lo_open=True), Int(1))
POSITIVE = Num(0, lo_open=True)
NON_NEG = Num(0)
CLASS_WEIGHT = P(
    "class_weight", (Choice("balanced"), NULL), None, "Class weights.", tasks=("classification",)
)

TREE_PARAMS: tuple[Param, ...] = (
    P(
        "criterion",
        Choice("gini", "entropy", "log_loss"),
        "gini",
        "Split quality measure.",
        default_by_task={"regression": "squared_error"},
        domains_by_task={
            "regression": (Choice("squared_error", "absolute_error", "friedman_mse", "poisson"),)
        },
    ),
    P("max_depth", (Int(1, 1000), NULL), None, "Maximum tree depth (null: unlimited)."),
    P("min_samples_split", (Int(2), Num(0, 1, lo_open=True)), 2, "Rows needed to split a node."),
    P("min_samples_leaf", (Int(1), Num(0, 0.5, lo_open=True)), 1, "Rows needed in a leaf."),
    P("max_leaf_nodes", (Int(2), NULL), None, "Maximum number of leaves (null: unlimited)."),
    P("min_impurity_decrease", NON_NEG, 0.0, "Minimum impurity decrease of a split."),
    P("ccp_alpha", NON_NEG, 0.0, "Cost-complexity pruning strength."),
)
MAX_FEATURES_TREE = (Choice("sqrt", "log2"), Int(1), Num(0, 1, lo_open=True), NULL)

FOREST_PARAMS: tuple[Param, ...] = (
    P("n_estimators", N_EST, 100, "Number of trees."),
    *TREE_PARAMS,
    P(
        "max_features",
        MAX_FEATURES_TREE,
        "sqrt",
        "Features considered per split.",
        default_by_task={"regression": 1.0},
    ),
    P("max_samples", (*FRACTION_OR_COUNT, NULL), None, "Rows drawn per tree when bootstrapping."),
    P(
        "class_weight",
        (Choice("balanced", "balanced_subsample"), NULL),
        None,
        "Class weights.",
        tasks=("classification",),
    ),
)

TREE = EstimatorSpec(kind="decision_tree")
BOTH_TASKS_TREE: Mapping[Task, EstimatorSpec] = {"classification": TREE, "regression": TREE}
SAMPLE_WEIGHTS = MemberNeed(
    "estimator", "'{member}' cannot weight rows, which AdaBoost needs", fit_param="sample_weight"
)
SOFT_VOTING = MemberNeed(
    "estimators",
    "'{member}' gives no probabilities, so it cannot take part in soft voting "
    "(use hard voting, or a probabilistic estimator)",
    when=("voting", ("soft",)),
    method="predict_proba",
)
LABEL_VECTORS = "'{member}' answers its labels as a column (its multiclass predict), which "
HARD_VOTES = MemberNeed(
    "estimators",
    LABEL_VECTORS + "hard voting cannot count (use soft voting)",
    when=("voting", ("hard",)),
    labels=True,
)
BOOSTED_LABELS = MemberNeed("estimator", LABEL_VECTORS + "AdaBoost cannot weigh", labels=True)
STACK_METHOD = MemberNeed(
    "estimators",
    "'{member}' has no {method}",
    when=("stack_method", ("predict_proba", "decision_function")),
)

BAGGING_ESTIMATOR_PARAMS = (
    P("n_estimators", N_EST, 10, "Number of members."),
    P("bootstrap_features", BOOL, False, "Draw features with replacement."),
)


def bagging_kind(
    name: str, description: str, fixed: dict[str, Any], extra: tuple[Param, ...]
) -> Kind:
    return Kind(
        name,
        "ensemble",
        description,
        {
            "classification": sk_ensemble.BaggingClassifier,
            "regression": sk_ensemble.BaggingRegressor,
        },
        params=BAGGING_ESTIMATOR_PARAMS + extra,
        fixed=fixed,
        slots=("estimator",),
        votes=True,
        size_param="n_estimators",
        default_estimator=BOTH_TASKS_TREE,
        members="bagged",
        member_rows="drawn",
        growth="members",
        oob="members",
        curve="oob",
        combination="mean",
        labels="argmax",
        compiled="bagging",
        importances="members_mean",
        explain="weighted_sum",
    )


def forest_kind(name: str, description: str, classes: Mapping[Task, type], bootstrap: bool) -> Kind:
    return Kind(
        name,
        "ensemble",
        description,
        classes,
        params=(*FOREST_PARAMS, P("bootstrap", BOOL, bootstrap, "Bootstrap rows per tree.")),
        votes=True,
        size_param="n_estimators",
        members="trees",
        growth="members",
        oob="forest",
        curve="oob",
        combination="mean",
        labels="argmax",
        compiled="forest",
        rows_apart=True,
        importances="estimator",
        explain="tree_shap",
    )


MAX_SAMPLES_BELOW_ONE = (Num(0, 1, lo_open=True, hi_open=True), Int(1))
MAX_FEATURES_BAG = (Num(0, 1, lo_open=True), Int(1))

METRICS_BY_TASK: Mapping[Task, tuple[str, ...]] = {
    task: tuple(name for name, m in SELECTION_METRICS.items() if m.task == task) for task in TASKS
}
SELECTION_PROBABILITIES = MemberNeed(
    "estimators",
    "'{member}' gives no probabilities, which ensemble selection needs (its result is a "
    "soft vote): use a probabilistic estimator (svm: probability=true)",
    when=("metric", METRICS_BY_TASK["classification"]),
    method="predict_proba",
)
