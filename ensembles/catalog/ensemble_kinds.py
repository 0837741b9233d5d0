"""scikit-learn's ensemble kinds, as data."""

from __future__ import annotations

from sklearn import ensemble as sk_ensemble

from ensembles.catalog.groups import (
    BOOSTED_LABELS,
    CLASS_WEIGHT,
    FRACTION_OR_COUNT,
    HARD_VOTES,
    MAX_FEATURES_BAG,
    MAX_FEATURES_TREE,
    MAX_SAMPLES_BELOW_ONE,
    N_EST,
    NON_NEG,
    POSITIVE,
    SAMPLE_WEIGHTS,
    SOFT_VOTING,
    STACK_METHOD,
    bagging_kind,
    forest_kind,
)
from ensembles.catalog.params import (
    BOOL,
    NULL,
    WEIGHTS,
    Choice,
    Int,
    Num,
    P,
)
from ensembles.catalog.traits import Kind
from ensembles.kinds import (
    adaboost,
)
from ensembles.science.hardest_rows import hardest_rows
from ensembles.specs import EstimatorSpec

SKLEARN_ENSEMBLE_KINDS: tuple[Kind, ...] = (
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
        member_needs=(SOFT_VOTING, HARD_VOTES),
        combination="soft_mean",
        labels="argmax_if_soft",
        compiled="voting",
        explain="weighted_sum",
    ),
    bagging_kind(
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
            P("max_features", MAX_FEATURES_BAG, 1.0, "Features drawn per member."),
        ),
    ),
    bagging_kind(
        "pasting",
        "Samples of rows without replacement.",
        {"bootstrap": False},
        (
            P("max_samples", MAX_SAMPLES_BELOW_ONE, 0.5, "Rows drawn per member (fraction < 1)."),
            P("max_features", MAX_FEATURES_BAG, 1.0, "Features drawn per member."),
        ),
    ),
    bagging_kind(
        "random_subspace",
        "All rows, a random subset of features per member.",
        {"bootstrap": False, "max_samples": 1.0},
        (P("max_features", MAX_FEATURES_BAG, 0.5, "Features drawn per member."),),
    ),
    bagging_kind(
        "random_patches",
        "Random subsets of rows and of features per member.",
        {},
        (
            P("bootstrap", BOOL, False, "Draw rows with replacement."),
            P("max_samples", MAX_SAMPLES_BELOW_ONE, 0.5, "Rows drawn per member."),
            P("max_features", MAX_FEATURES_BAG, 0.5, "Features drawn per member."),
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
        member_needs=(SAMPLE_WEIGHTS, BOOSTED_LABELS),
        curve="stages",
        combination="vote_or_median",
        hardest_rows=hardest_rows,
        stop_note=adaboost.stop_note,
        importances="estimator",
        explain="weighted_sum",
        explain_space="margin",
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
        combination="sum",
        labels="raw_ge",
        compiled="boosting",
        rows_apart=True,
        importances="estimator",
        explain="tree_shap",
        explain_space="margin",
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
        combination="sum",
        labels="raw_gt",
        compiled="histogram",
        explain="tree_shap",
        explain_space="margin",
    ),
    forest_kind(
        "random_forest",
        "Breiman's random forest.",
        {
            "classification": sk_ensemble.RandomForestClassifier,
            "regression": sk_ensemble.RandomForestRegressor,
        },
        bootstrap=True,
    ),
    forest_kind(
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
        combination="final_estimator",
        labels="stacked",
        compiled="stacking",
        explain="weighted_sum",
        explain_space="margin",
    ),
)
