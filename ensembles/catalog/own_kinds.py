"""The service's own ensemble kinds (:mod:`ensembles.kinds`), as data."""

from __future__ import annotations

from sklearn import ensemble as sk_ensemble

from ensembles.catalog.groups import (
    BOTH_TASKS_TREE,
    METRICS_BY_TASK,
    N_EST,
    SELECTION_PROBABILITIES,
)
from ensembles.catalog.params import MAX_N_ESTIMATORS, Choice, Int, Num, P
from ensembles.catalog.traits import Kind
from ensembles.kinds import (
    EnsembleSelectionClassifier,
    EnsembleSelectionRegressor,
    PastingVotesClassifier,
    PastingVotesRegressor,
)
from ensembles.kinds import adaboost_mh as _mh
from ensembles.kinds import ensemble_selection as _selection

OWN_KINDS: tuple[Kind, ...] = (
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
        combination="soft_mean",
        labels="argmax_if_soft",
        compiled="voting",
        explain="weighted_sum",
        importances="members_mean",
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
                Choice(*METRICS_BY_TASK["classification"]),
                "accuracy",
                "What the selection maximises (log_loss, rmse, mae: minimises).",
                default_by_task={"regression": "r2"},
                domains_by_task={"regression": (Choice(*METRICS_BY_TASK["regression"]),)},
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
        combination="soft_mean",
        labels="argmax_if_soft",
        compiled="voting",
        explain="weighted_sum",
        spec_check=_selection.spec_problems,
        own_plots=("selection_curve",),
    ),
    Kind(
        "adaboost_mh",
        "ensemble",
        "Schapire & Singer's AdaBoost.MH: one weight per (row, class) pair; each round a "
        "tree of max_depth (default: a stump) chosen to minimise Z = 2 sum sqrt(W+ W-) "
        "gives each leaf a real score per class, 1/2 ln((W+ + eps)/(W- + eps)); the label "
        "is the class with the largest summed score. Classification only.",
        {"classification": _mh.AdaBoostMHClassifier},
        params=(
            P("n_estimators", N_EST, 100, "Boosting rounds (members)."),
            P("learning_rate", Num(0, lo_open=True), 1.0, "Scale of each member's scores."),
            P("max_depth", Int(1, 16), 1, "Depth of each member (1: stumps)."),
        ),
        size_param="n_estimators",
        growth="own",
        curve="stages",
        combination="sum",
        labels="raw_gt",
        importances="estimator",
        hardest_rows=_mh.hardest_rows,
        fitted_curves=_mh.fitted_curves,
        libraries=("ensemble-service",),
        explain=_mh.explanation,
        explain_space="margin",
    ),
)
