"""The kinds: the single source of truth for what users may ask for, and how each behaves.

Every ensemble and base-learner kind names its scikit-learn class per task, the
parameters a user may set (type, default, bounds as data, exported as JSON Schema for
``GET /v1/kinds``), the parameters the kind fixes (e.g. ``bootstrap`` for pasting) and
the sub-estimator slots it takes.  Parameters the service owns (``n_jobs``, ``verbose``,
``warm_start``, ``random_state``, ``oob_score``) are never listed, so they can never be
set by a request.

Each kind also carries its traits (as scikit-learn keeps tags next to a class): its
default members, how its fitted members are walked, the rows they see, what they must
offer, how it grows, where its OOB figures and score curve come from, and what it handles
natively.  Validation, building, training and metrics read these traits instead of
switching on kind names or classes, so a new kind is one entry here (plus its tests).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sklearn import ensemble as sk_ensemble
from sklearn import linear_model, naive_bayes, neighbors, neural_network, svm, tree

from ensembles.kinds import (
    EnsembleSelectionClassifier,
    EnsembleSelectionRegressor,
    PastingVotesClassifier,
    PastingVotesRegressor,
)
from ensembles.kinds import ensemble_selection as _selection
from ensembles.kinds.selection import METRICS as SELECTION_METRICS
from ensembles.specs import EstimatorSpec

Task = Literal["classification", "regression"]
TASKS: tuple[Task, ...] = ("classification", "regression")
Slot = Literal["estimator", "estimators", "final_estimator"]

# How a fitted ensemble's members are walked: ``named`` estimators_ beside their names
# (voting, stacking); ``bagged`` estimators_ with their feature subsets and drawn rows;
# ``trees`` estimators_ with their bootstrap rows; ``boosted`` estimators_ predicting raw
# labels (AdaBoost); ``none``: no member predicts on its own (gradient boosting, bases).
# ``bites``: named members fitted on small bites of rows (pasting_votes), walked as
# ``named`` once fitted but scored as a homogeneous crowd.
MemberWalk = Literal["named", "bagged", "trees", "boosted", "bites", "none"]
# The rows each member is fitted on: the ensemble's own (``same``), ``max_samples`` drawn
# per member (``drawn``), every row reweighted (``weighted``), or stacking's ``cv`` folds
# for its named members (``folds``; the final estimator sees the ensemble's rows).
# ``bites``: ``rows_param`` rows per member (pasting_votes).
MemberRows = Literal["same", "drawn", "weighted", "folds", "bites"]
# How fitting reports progress: one ``fit``; one fit of ``size_param`` ``members`` fitted
# in parallel and counted as they finish (ensembles.parallel); or gradient boosting's
# per-stage ``monitor`` hook. ``own``: the service's own algorithm (ensembles.kinds),
# fitted with a ``monitor``.
Growth = Literal["once", "members", "monitor", "own"]
# Where OOB figures come from: the members' own out-of-bag rows (``members``), the same
# with scikit-learn's ``oob_decision_function_`` / ``oob_prediction_`` for the final value
# (``forest``), the per-stage ``oob_scores_`` of subsampled boosting (``stages``), none.
# ``own``: the out-of-bag tallies the service's own algorithm kept while fitting.
OobSource = Literal["members", "forest", "stages", "own", "none"]
# Where the score curve comes from: OOB scores as members are added, scores after each
# boosting stage (``staged_predict``), or none.
CurveSource = Literal["oob", "stages", "none"]

SpecCheck = Callable[[EstimatorSpec], list[tuple[tuple[str | int, ...], str]]]

SERVICE_OWNED_PARAMS = frozenset({"n_jobs", "verbose", "warm_start", "random_state", "oob_score"})
MAX_N_ESTIMATORS = 5000


# --- value domains -------------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    """One admissible shape of a parameter value (a parameter accepts any of its domains)."""

    json_type: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: tuple[Any, ...] = ()
    items: Literal["positive_integer", "non_negative_number"] | None = None

    def accepts(self, value: object) -> bool:
        if self.json_type == "null":
            return value is None
        if self.json_type == "boolean":
            return isinstance(value, bool)
        if self.json_type == "string":
            return isinstance(value, str) and (not self.choices or value in self.choices)
        if self.json_type == "integer":
            return isinstance(value, int) and not isinstance(value, bool) and self._in_range(value)
        if self.json_type == "number":
            ok_type = isinstance(value, int | float) and not isinstance(value, bool)
            return ok_type and math.isfinite(float(value)) and self._in_range(float(value))  # type: ignore[arg-type]
        if self.json_type == "array":
            return isinstance(value, list) and bool(value) and all(self._item_ok(v) for v in value)
        raise AssertionError(self.json_type)

    def _item_ok(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.items == "positive_integer":
            return isinstance(value, int) and value >= 1
        return math.isfinite(value) and value >= 0

    def _in_range(self, value: float) -> bool:
        lo, hi = self.minimum, self.maximum
        below = lo is not None and (value < lo or (self.exclusive_minimum and value == lo))
        above = hi is not None and (value > hi or (self.exclusive_maximum and value == hi))
        return not (below or above)

    def describe(self) -> str:
        if self.json_type in ("null", "boolean"):
            return self.json_type
        if self.json_type == "string":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.json_type == "array":
            return f"a non-empty list of {self.items}s".replace("_", " ")
        noun = "an integer" if self.json_type == "integer" else "a number"
        low = "" if self.minimum is None else ("> " if self.exclusive_minimum else ">= ")
        high = "" if self.maximum is None else ("< " if self.exclusive_maximum else "<= ")
        parts = [
            p
            for p in (low and f"{low}{_fmt(self.minimum)}", high and f"{high}{_fmt(self.maximum)}")
            if p
        ]
        return noun + (" " + " and ".join(parts) if parts else "")

    def json_schema(self) -> dict[str, Any]:
        if self.json_type == "string" and self.choices:
            return {"type": "string", "enum": list(self.choices)}
        if self.json_type == "array":
            item = (
                {"type": "integer", "minimum": 1}
                if self.items == "positive_integer"
                else {"type": "number", "minimum": 0}
            )
            return {"type": "array", "minItems": 1, "items": item}
        schema: dict[str, Any] = {"type": self.json_type}
        if self.minimum is not None:
            schema["exclusiveMinimum" if self.exclusive_minimum else "minimum"] = self.minimum
        if self.maximum is not None:
            schema["exclusiveMaximum" if self.exclusive_maximum else "maximum"] = self.maximum
        return schema


def _fmt(x: float | None) -> str:
    return "" if x is None else (str(int(x)) if float(x).is_integer() else repr(x))


def Int(lo: float | None = None, hi: float | None = None) -> Domain:  # noqa: N802
    return Domain("integer", lo, hi)


def Num(  # noqa: N802
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> Domain:
    return Domain("number", lo, hi, lo_open, hi_open)


def Choice(*values: str) -> Domain:  # noqa: N802
    return Domain("string", choices=values)


BOOL = Domain("boolean")
NULL = Domain("null")
INT_LIST = Domain("array", items="positive_integer")
WEIGHTS = Domain("array", items="non_negative_number")


@dataclass(frozen=True)
class Param:
    """A user-settable parameter: its domains, default (per task when they differ), and help."""

    name: str
    domains: tuple[Domain, ...]
    default: Any
    description: str
    tasks: tuple[Task, ...] = TASKS
    default_by_task: Mapping[Task, Any] = field(default_factory=dict)
    domains_by_task: Mapping[Task, tuple[Domain, ...]] = field(default_factory=dict)

    def default_for(self, task: Task) -> Any:
        return self.default_by_task.get(task, self.default)

    def domains_for(self, task: Task) -> tuple[Domain, ...]:
        return self.domains_by_task.get(task, self.domains)

    def accepts(self, value: object, task: Task) -> bool:
        return any(d.accepts(value) for d in self.domains_for(task))

    def describe(self, task: Task) -> str:
        return " or ".join(d.describe() for d in self.domains_for(task))

    def json_schema(self, task: Task) -> dict[str, Any]:
        domains = self.domains_for(task)
        body: dict[str, Any] = (
            domains[0].json_schema()
            if len(domains) == 1
            else {"anyOf": [d.json_schema() for d in domains]}
        )
        return {**body, "default": self.default_for(task), "description": self.description}


def P(  # noqa: N802
    name: str, domains: Domain | tuple[Domain, ...], default: Any, description: str, **kw: Any
) -> Param:
    return Param(
        name, domains if isinstance(domains, tuple) else (domains,), default, description, **kw
    )


@dataclass(frozen=True)
class MemberNeed:
    """What the members in one slot must offer, so a spec that cannot fit is refused early.

    ``when`` (parameter, values) limits the need to those parameter values; ``method`` is a
    method each member must have (None: the parameter's value names it); ``fit_param`` a
    parameter each member's ``fit`` must take.  ``message`` is formatted with ``member``
    (the member's kind) and ``method``.
    """

    slot: Slot
    message: str
    when: tuple[str, tuple[Any, ...]] | None = None
    method: str | None = None
    fit_param: str | None = None


@dataclass(frozen=True)
class Kind:
    """One kind a spec may name: what a user may set, and the traits the library reads."""

    name: str
    family: Literal["ensemble", "base"]
    description: str
    classes: Mapping[Task, type]
    params: tuple[Param, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    slots: tuple[Slot, ...] = ()
    votes: bool = False  # made of voting members (per-request voting override, votes, std)
    # The parameter choosing hard or soft voting (None: members' probabilities decide).
    voting_param: str | None = None
    # The parameter counting the members fitted (None: one fit, or its named members).
    size_param: str | None = None
    # Members filled in when a spec leaves a slot empty, per task.
    default_estimator: Mapping[Task, EstimatorSpec] = field(default_factory=dict)
    default_final_estimator: Mapping[Task, EstimatorSpec] = field(default_factory=dict)
    members: MemberWalk = "none"
    member_rows: MemberRows = "same"
    member_needs: tuple[MemberNeed, ...] = ()
    growth: Growth = "once"
    oob: OobSource = "none"
    curve: CurveSource = "none"
    native_missing: bool = False  # takes NaN itself: numeric columns are never imputed
    native_categorical: bool = False  # takes ordinal codes of categories itself
    # A boolean parameter that, when true, wraps the estimator in CalibratedClassifierCV
    # instead of reaching it (svm's probability, deprecated by scikit-learn 1.9).
    calibrate_param: str | None = None
    tuple_params: frozenset[str] = frozenset()  # JSON lists scikit-learn wants as tuples
    # A parameter counting training rows, which must not exceed the rows of its fit.
    rows_param: str | None = None
    # The service's own algorithms (ensembles.kinds): the scikit-learn class the fitted
    # model becomes in the artifact, per task.  Such a kind stands only at the top of a
    # spec (nested, its own class would reach the artifact).
    becomes: Mapping[Task, type] = field(default_factory=dict)
    # Checks of a resolved spec the parameter bounds cannot express, as (path relative to
    # the spec, message) pairs; run once its own parameters are valid.
    spec_check: SpecCheck | None = None

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(t for t in TASKS if t in self.classes)

    @property
    def leaves_rows_out(self) -> bool:
        """Can a fit of this kind leave rows out of its members' training (an OOB estimate,
        an OOB curve)? Never without an OOB source, nor when the fixed parameters give every
        member every row (random_subspace): a note on such a kind would explain nothing."""
        every_row = self.fixed.get("bootstrap") is False and self.fixed.get("max_samples") == 1.0
        return self.oob != "none" and not every_row

    @property
    def predicts_out_of_fold(self) -> bool:
        """Are its members scored out of fold: stacking always, voting (named members on
        the same rows) with evaluation.cv_folds."""
        return self.members == "named" and not self.becomes

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def params_for(self, task: Task) -> tuple[Param, ...]:
        return tuple(p for p in self.params if task in p.tasks)

    def json_schema(self, task: Task) -> dict[str, Any]:
        params = self.params_for(task)
        return {
            "type": "object",
            "additionalProperties": False,
            "properties": {p.name: p.json_schema(task) for p in params},
        }

    def as_catalog_entry(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "family": self.family,
            "description": self.description,
            "tasks": list(self.tasks),
            "estimator_slots": list(self.slots),
            "supports_voting_override": self.votes,
            "fixed_params": dict(self.fixed),
            "sklearn_classes": {t: c.__name__ for t, c in (self.becomes or self.classes).items()},
            "top_level_only": bool(self.becomes),
            "params": {t: self.json_schema(t) for t in self.tasks},
        }


# --- shared parameter groups -----------------------------------------------------------

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
STACK_METHOD = MemberNeed(
    "estimators",
    "'{member}' has no {method}",
    when=("stack_method", ("predict_proba", "decision_function")),
)

BAGGING_ESTIMATOR_PARAMS = (
    P("n_estimators", N_EST, 10, "Number of members."),
    P("bootstrap_features", BOOL, False, "Draw features with replacement."),
)


def _bagging(name: str, description: str, fixed: dict[str, Any], extra: tuple[Param, ...]) -> Kind:
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
    )


def _forest(name: str, description: str, classes: Mapping[Task, type], bootstrap: bool) -> Kind:
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
    )


_MAX_SAMPLES_BELOW_ONE = (Num(0, 1, lo_open=True, hi_open=True), Int(1))
_MAX_FEATURES_BAG = (Num(0, 1, lo_open=True), Int(1))

_SELECTION_METRICS: Mapping[Task, tuple[str, ...]] = {
    task: tuple(name for name, m in SELECTION_METRICS.items() if m.task == task) for task in TASKS
}
SELECTION_PROBABILITIES = MemberNeed(
    "estimators",
    "'{member}' gives no probabilities, which ensemble selection needs (its result is a "
    "soft vote): use a probabilistic estimator (svm: probability=true)",
    when=("metric", _SELECTION_METRICS["classification"]),
    method="predict_proba",
)

ENSEMBLE_KINDS: tuple[Kind, ...] = (
    Kind(
        "voting",
        "ensemble",
        "Hard or soft vote (classification) or average (regression) of named estimators.",
        {"classification": sk_ensemble.VotingClassifier, "regression": sk_ensemble.VotingRegressor},
        params=(
            P(
                "voting",
                Choice("hard", "soft"),
                "hard",
                "How votes combine.",
                tasks=("classification",),
            ),
            P("weights", (WEIGHTS, NULL), None, "One non-negative weight per estimator."),
        ),
        slots=("estimators",),
        votes=True,
        voting_param="voting",
        members="named",
        member_needs=(SOFT_VOTING,),
    ),
    _bagging(
        "bagging",
        "Bootstrap samples (with replacement) of rows, optional feature sampling.",
        {"bootstrap": True},
        (
            P(
                "max_samples",
                (*FRACTION_OR_COUNT, NULL),
                None,
                "Rows drawn per member (null: all).",
            ),
            P("max_features", _MAX_FEATURES_BAG, 1.0, "Features drawn per member."),
        ),
    ),
    _bagging(
        "pasting",
        "Samples of rows without replacement.",
        {"bootstrap": False},
        (
            P("max_samples", _MAX_SAMPLES_BELOW_ONE, 0.5, "Rows drawn per member (fraction < 1)."),
            P("max_features", _MAX_FEATURES_BAG, 1.0, "Features drawn per member."),
        ),
    ),
    _bagging(
        "random_subspace",
        "All rows, a random subset of features per member.",
        {"bootstrap": False, "max_samples": 1.0},
        (P("max_features", _MAX_FEATURES_BAG, 0.5, "Features drawn per member."),),
    ),
    _bagging(
        "random_patches",
        "Random subsets of rows and of features per member.",
        {},
        (
            P("bootstrap", BOOL, False, "Draw rows with replacement."),
            P("max_samples", _MAX_SAMPLES_BELOW_ONE, 0.5, "Rows drawn per member."),
            P("max_features", _MAX_FEATURES_BAG, 0.5, "Features drawn per member."),
        ),
    ),
    Kind(
        "adaboost",
        "ensemble",
        "AdaBoost: SAMME for classification, AdaBoost.R2 for regression.",
        {
            "classification": sk_ensemble.AdaBoostClassifier,
            "regression": sk_ensemble.AdaBoostRegressor,
        },
        params=(
            P("n_estimators", N_EST, 50, "Maximum number of boosting rounds."),
            P("learning_rate", POSITIVE, 1.0, "Weight of each member."),
            P(
                "loss",
                Choice("linear", "square", "exponential"),
                "linear",
                "Loss used to reweight rows.",
                tasks=("regression",),
            ),
        ),
        slots=("estimator",),
        size_param="n_estimators",
        # scikit-learn's own defaults: stumps for SAMME, depth-3 trees for AdaBoost.R2.
        default_estimator={
            "classification": EstimatorSpec(kind="decision_tree", params={"max_depth": 1}),
            "regression": EstimatorSpec(kind="decision_tree", params={"max_depth": 3}),
        },
        members="boosted",
        member_rows="weighted",
        member_needs=(SAMPLE_WEIGHTS,),
        curve="stages",
    ),
    Kind(
        "gradient_boosting",
        "ensemble",
        "Gradient boosting of regression trees with shrinkage, subsampling, early stopping.",
        {
            "classification": sk_ensemble.GradientBoostingClassifier,
            "regression": sk_ensemble.GradientBoostingRegressor,
        },
        params=(
            P(
                "loss",
                Choice("log_loss", "exponential"),
                "log_loss",
                "Loss to optimise.",
                default_by_task={"regression": "squared_error"},
                domains_by_task={
                    "regression": (Choice("squared_error", "absolute_error", "huber", "quantile"),)
                },
            ),
            P("n_estimators", N_EST, 100, "Number of boosting stages."),
            P("learning_rate", NON_NEG, 0.1, "Shrinkage of each stage."),
            P("subsample", Num(0, 1, lo_open=True), 1.0, "Row fraction per stage (< 1: OOB)."),
            P("max_depth", (Int(1, 1000), NULL), 3, "Depth of each tree."),
            P("min_samples_split", (Int(2), Num(0, 1, lo_open=True)), 2, "Rows to split a node."),
            P("min_samples_leaf", (Int(1), Num(0, 0.5, lo_open=True)), 1, "Rows in a leaf."),
            P("max_features", MAX_FEATURES_TREE, None, "Features per split (null: all)."),
            P("max_leaf_nodes", (Int(2), NULL), None, "Leaves per tree (null: unlimited)."),
            P("min_impurity_decrease", NON_NEG, 0.0, "Minimum impurity decrease of a split."),
            P("ccp_alpha", NON_NEG, 0.0, "Cost-complexity pruning strength."),
            P(
                "alpha",
                Num(0, 1, lo_open=True, hi_open=True),
                0.9,
                "Quantile for huber/quantile.",
                tasks=("regression",),
            ),
            P("n_iter_no_change", (Int(1), NULL), None, "Early stopping patience (null: off)."),
            P(
                "validation_fraction",
                Num(0, 1, lo_open=True, hi_open=True),
                0.1,
                "Early-stopping share.",
            ),
            P("tol", NON_NEG, 1e-4, "Early-stopping tolerance."),
        ),
        size_param="n_estimators",
        growth="monitor",
        oob="stages",
        curve="stages",
    ),
    Kind(
        "hist_gradient_boosting",
        "ensemble",
        "Histogram gradient boosting with native missing values and categorical columns.",
        {
            "classification": sk_ensemble.HistGradientBoostingClassifier,
            "regression": sk_ensemble.HistGradientBoostingRegressor,
        },
        params=(
            P(
                "loss",
                Choice("log_loss"),
                "log_loss",
                "Loss to optimise.",
                default_by_task={"regression": "squared_error"},
                domains_by_task={
                    "regression": (
                        Choice("squared_error", "absolute_error", "gamma", "poisson", "quantile"),
                    )
                },
            ),
            P(
                "quantile",
                (Num(0, 1), NULL),
                None,
                "Quantile for the quantile loss.",
                tasks=("regression",),
            ),
            P("max_iter", N_EST, 100, "Number of boosting iterations."),
            P("learning_rate", POSITIVE, 0.1, "Shrinkage."),
            P("max_leaf_nodes", (Int(2), NULL), 31, "Leaves per tree."),
            P("max_depth", (Int(1, 1000), NULL), None, "Depth of each tree."),
            P("min_samples_leaf", Int(1), 20, "Rows in a leaf."),
            P("l2_regularization", NON_NEG, 0.0, "L2 penalty on leaf values."),
            P("max_features", Num(0, 1, lo_open=True), 1.0, "Feature share per split."),
            P("max_bins", Int(2, 255), 255, "Histogram bins."),
            P(
                "early_stopping",
                (Choice("auto"), BOOL),
                "auto",
                "Early stopping ('auto': above 10,000 rows).",
            ),
            P("n_iter_no_change", Int(1), 10, "Early stopping patience."),
            P(
                "validation_fraction",
                (Num(0, 1, lo_open=True, hi_open=True), Int(1), NULL),
                0.1,
                "Early-stopping share.",
            ),
            P("tol", NON_NEG, 1e-7, "Early-stopping tolerance."),
            CLASS_WEIGHT,
        ),
        size_param="max_iter",
        curve="stages",
        native_missing=True,
        native_categorical=True,
    ),
    _forest(
        "random_forest",
        "Breiman's random forest.",
        {
            "classification": sk_ensemble.RandomForestClassifier,
            "regression": sk_ensemble.RandomForestRegressor,
        },
        bootstrap=True,
    ),
    _forest(
        "extra_trees",
        "Extremely randomized trees.",
        {
            "classification": sk_ensemble.ExtraTreesClassifier,
            "regression": sk_ensemble.ExtraTreesRegressor,
        },
        bootstrap=False,
    ),
    Kind(
        "stacking",
        "ensemble",
        "Stacked generalization: out-of-fold predictions of the estimators feed a final estimator.",
        {
            "classification": sk_ensemble.StackingClassifier,
            "regression": sk_ensemble.StackingRegressor,
        },
        params=(
            P("cv", Int(2, 20), 5, "Folds for the out-of-fold predictions."),
            P(
                "stack_method",
                Choice("auto", "predict_proba", "decision_function", "predict"),
                "auto",
                "Member output fed to the final estimator.",
                tasks=("classification",),
            ),
            P(
                "passthrough",
                BOOL,
                False,
                "Append the original features to the final estimator's input.",
            ),
        ),
        slots=("estimators", "final_estimator"),
        default_final_estimator={
            "classification": EstimatorSpec(kind="logistic_regression"),
            "regression": EstimatorSpec(kind="ridge"),
        },
        members="named",
        member_rows="folds",
        member_needs=(STACK_METHOD,),
    ),
    Kind(
        "pasting_votes",
        "ensemble",
        "Breiman's pasting of small votes: members fitted one after another on bites of "
        "bite_size rows, drawn at random (Rvotes) or by importance (Ivotes), combined by an "
        "unweighted majority vote (regression: the mean); grows until the out-of-bag error "
        "has not improved for patience members.",
        {"classification": PastingVotesClassifier, "regression": PastingVotesRegressor},
        params=(
            P(
                "bite_size",
                Int(1, 100_000_000),
                100,
                "Rows per bite, each member's training rows (fewer than the training rows).",
            ),
            P(
                "sampling",
                Choice("random", "importance"),
                "importance",
                "How bites are drawn: 'random' (Rvotes) or 'importance' (Ivotes: rows the "
                "out-of-bag vote gets wrong always, others with probability e/(1-e)); "
                "regression: random only.",
                default_by_task={"regression": "random"},
                domains_by_task={"regression": (Choice("random"),)},
            ),
            P(
                "patience",
                Int(1, MAX_N_ESTIMATORS),
                10,
                "Stop when the smoothed out-of-bag error has not improved for this many members.",
            ),
            P("max_estimators", N_EST, 100, "Most members fitted."),
        ),
        slots=("estimator",),
        votes=True,
        size_param="max_estimators",
        default_estimator=BOTH_TASKS_TREE,
        members="bites",
        member_rows="bites",
        growth="own",
        oob="own",
        curve="oob",
        rows_param="bite_size",
        becomes={
            "classification": sk_ensemble.VotingClassifier,
            "regression": sk_ensemble.VotingRegressor,
        },
    ),
    Kind(
        "ensemble_selection",
        "ensemble",
        "Caruana's ensemble selection: a library of named estimators, their out-of-fold "
        "predictions over cv folds, greedy forward selection with replacement maximising "
        "metric (sorted initialisation, optional bagged selection); a weighted soft vote "
        "(regression: weighted mean) of the selected estimators refitted on every row.",
        {
            "classification": EnsembleSelectionClassifier,
            "regression": EnsembleSelectionRegressor,
        },
        params=(
            P("cv", Int(2, 20), 5, "Folds of the out-of-fold predictions (the same for all)."),
            P(
                "metric",
                Choice(*_SELECTION_METRICS["classification"]),
                "accuracy",
                "What the selection maximises (log_loss, rmse, mae: minimises).",
                default_by_task={"regression": "r2"},
                domains_by_task={"regression": (Choice(*_SELECTION_METRICS["regression"]),)},
            ),
            P("init_size", Int(1, 50), 1, "Best members (by own score) that start the ensemble."),
            P("max_steps", Int(0, 1000), 50, "Greedy additions after the initial members."),
            P("bags", Int(1, 100), 1, "Selections from random subsets of the library, summed."),
            P(
                "bag_fraction",
                Num(0, 1, lo_open=True),
                1.0,
                "Share of the library each bag draws (rounded, at least 1 member).",
            ),
        ),
        slots=("estimators",),
        votes=True,
        members="named",
        member_rows="folds",
        member_needs=(SELECTION_PROBABILITIES,),
        growth="own",
        becomes={
            "classification": sk_ensemble.VotingClassifier,
            "regression": sk_ensemble.VotingRegressor,
        },
        spec_check=_selection.spec_problems,
    ),
)

BASE_KINDS: tuple[Kind, ...] = (
    Kind(
        "decision_tree",
        "base",
        "A CART decision tree.",
        {"classification": tree.DecisionTreeClassifier, "regression": tree.DecisionTreeRegressor},
        params=(
            *TREE_PARAMS,
            P("splitter", Choice("best", "random"), "best", "Split strategy."),
            P("max_features", MAX_FEATURES_TREE, None, "Features per split (null: all)."),
            CLASS_WEIGHT,
        ),
    ),
    Kind(
        "logistic_regression",
        "base",
        "Logistic regression.",
        {"classification": linear_model.LogisticRegression},
        params=(
            P("C", POSITIVE, 1.0, "Inverse regularisation strength."),
            P("l1_ratio", Num(0, 1), 0.0, "Elastic-net mixing (0: L2, 1: L1; needs solver saga)."),
            P(
                "solver",
                Choice("lbfgs", "liblinear", "newton-cg", "newton-cholesky", "sag", "saga"),
                "lbfgs",
                "Optimiser.",
            ),
            P("max_iter", Int(1, 100_000), 100, "Iterations."),
            P("tol", POSITIVE, 1e-4, "Tolerance."),
            P("fit_intercept", BOOL, True, "Fit an intercept."),
            CLASS_WEIGHT,
        ),
    ),
    Kind(
        "linear_regression",
        "base",
        "Ordinary least squares.",
        {"regression": linear_model.LinearRegression},
        params=(
            P("fit_intercept", BOOL, True, "Fit an intercept."),
            P("positive", BOOL, False, "Force non-negative coefficients."),
        ),
    ),
    Kind(
        "ridge",
        "base",
        "Ridge regression (RidgeClassifier for classification: no probabilities).",
        {"classification": linear_model.RidgeClassifier, "regression": linear_model.Ridge},
        params=(
            P("alpha", NON_NEG, 1.0, "Regularisation strength."),
            P("fit_intercept", BOOL, True, "Fit an intercept."),
            P(
                "solver",
                Choice("auto", "svd", "cholesky", "lsqr", "sparse_cg", "sag", "saga", "lbfgs"),
                "auto",
                "Solver.",
            ),
            P("tol", POSITIVE, 1e-4, "Tolerance."),
            CLASS_WEIGHT,
        ),
    ),
    Kind(
        "knn",
        "base",
        "k nearest neighbours.",
        {
            "classification": neighbors.KNeighborsClassifier,
            "regression": neighbors.KNeighborsRegressor,
        },
        params=(
            P("n_neighbors", Int(1, 10_000), 5, "Neighbours consulted."),
            P("weights", Choice("uniform", "distance"), "uniform", "Neighbour weighting."),
            P(
                "algorithm",
                Choice("auto", "ball_tree", "kd_tree", "brute"),
                "auto",
                "Search structure.",
            ),
            P("leaf_size", Int(1, 10_000), 30, "Leaf size of the search tree."),
            P("p", Num(0, lo_open=True), 2, "Minkowski power."),
            P(
                "metric",
                Choice("minkowski", "euclidean", "manhattan", "chebyshev", "cosine"),
                "minkowski",
                "Distance.",
            ),
        ),
        rows_param="n_neighbors",
    ),
    Kind(
        "svm",
        "base",
        "Support vector machine (SVC / SVR); probability=true calibrates it (Platt, 5 folds).",
        {"classification": svm.SVC, "regression": svm.SVR},
        params=(
            P("C", POSITIVE, 1.0, "Regularisation (inverse)."),
            P("kernel", Choice("linear", "poly", "rbf", "sigmoid"), "rbf", "Kernel."),
            P("degree", Int(0, 20), 3, "Degree of the poly kernel."),
            P("gamma", (Choice("scale", "auto"), NON_NEG), "scale", "Kernel coefficient."),
            P("coef0", Num(), 0.0, "Independent term of poly/sigmoid kernels."),
            P("tol", POSITIVE, 1e-3, "Tolerance."),
            P("shrinking", BOOL, True, "Shrinking heuristic."),
            P("max_iter", Int(-1), -1, "Iteration cap (-1: none)."),
            P("epsilon", NON_NEG, 0.1, "Epsilon tube.", tasks=("regression",)),
            P("probability", BOOL, False, "Calibrated probabilities.", tasks=("classification",)),
            CLASS_WEIGHT,
        ),
        calibrate_param="probability",
    ),
    Kind(
        "gaussian_nb",
        "base",
        "Gaussian naive Bayes.",
        {"classification": naive_bayes.GaussianNB},
        params=(P("var_smoothing", NON_NEG, 1e-9, "Variance added for stability."),),
    ),
    Kind(
        "mlp",
        "base",
        "Multi-layer perceptron.",
        {
            "classification": neural_network.MLPClassifier,
            "regression": neural_network.MLPRegressor,
        },
        params=(
            P("hidden_layer_sizes", INT_LIST, [100], "Units per hidden layer."),
            P("activation", Choice("identity", "logistic", "tanh", "relu"), "relu", "Activation."),
            P("solver", Choice("lbfgs", "sgd", "adam"), "adam", "Optimiser."),
            P("alpha", NON_NEG, 1e-4, "L2 penalty."),
            P("batch_size", (Choice("auto"), Int(1)), "auto", "Minibatch size."),
            P(
                "learning_rate",
                Choice("constant", "invscaling", "adaptive"),
                "constant",
                "Schedule.",
            ),
            P("learning_rate_init", POSITIVE, 1e-3, "Initial learning rate."),
            P("max_iter", Int(1, 100_000), 200, "Epochs."),
            P("tol", POSITIVE, 1e-4, "Tolerance."),
            P("early_stopping", BOOL, False, "Stop on a validation split."),
            P(
                "validation_fraction",
                Num(0, 1, lo_open=True, hi_open=True),
                0.1,
                "Validation share.",
            ),
            P("n_iter_no_change", Int(1), 10, "Patience."),
            P("momentum", Num(0, 1), 0.9, "SGD momentum."),
            P("shuffle", BOOL, True, "Shuffle each epoch."),
        ),
        tuple_params=frozenset({"hidden_layer_sizes"}),
    ),
)

KINDS: Mapping[str, Kind] = {k.name: k for k in (*ENSEMBLE_KINDS, *BASE_KINDS)}


def catalog_document() -> dict[str, Any]:
    """The document ``GET /v1/kinds`` serves."""
    return {
        "ensemble_kinds": [k.as_catalog_entry() for k in ENSEMBLE_KINDS],
        "base_kinds": [k.as_catalog_entry() for k in BASE_KINDS],
        "service_owned_params": sorted(SERVICE_OWNED_PARAMS),
    }
