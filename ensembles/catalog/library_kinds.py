"""The boosting libraries as kinds (xgboost, lightgbm, catboost), as data.

Each is fitted by its module in :mod:`ensembles.kinds` (``growth="rounds"``); the library
is an optional extra (``boosting``): without it the kind is still listed, and refused at
submit with the extra to install.
"""

from __future__ import annotations

from ensembles.catalog.groups import N_EST, NON_NEG, POSITIVE
from ensembles.catalog.params import MAX_N_ESTIMATORS, NULL, Choice, Int, Num, P, Param
from ensembles.catalog.traits import Kind, Library, Stages
from ensembles.explain import native
from ensembles.kinds import catboost_kind, lightgbm_kind, lightgbm_pass, xgboost_kind
from ensembles.kinds.boosting_library import FIT_PARAMS, classes_of

OPEN_UNIT = Num(0, 1, lo_open=True, hi_open=True)
SHARE = Num(0, 1, lo_open=True)


def _stopping() -> tuple[Param, ...]:
    return (
        P(
            "early_stopping_rounds",
            (Int(1, MAX_N_ESTIMATORS), NULL),
            None,
            "Stop when the validation score has not improved for this many rounds "
            "(null: off; top level only).",
        ),
        P(
            "validation_fraction",
            OPEN_UNIT,
            0.1,
            "Share of the training rows (never the hold-out) early stopping validates on.",
        ),
    )


def _objective(name: str, classification: tuple[str, ...], regression: tuple[str, ...]) -> Param:
    return P(
        name,
        (Choice(*classification), NULL),
        None,
        "Objective (null: the library's choice for the classes).",
        default_by_task={"regression": regression[0]},
        domains_by_task={"regression": (Choice(*regression),)},
    )


_TRAITS = {
    "family": "ensemble",
    "growth": "rounds",
    "curve": "stages",
    "native_missing": True,
    "combination": "sum",
    "labels": "argmax",  # predict is the first maximum of predict_proba (every library)
    "importances": "estimator",
    "explain_space": "margin",
    "top_level_params": FIT_PARAMS,
    "threads_param": "n_jobs",
}

XGBOOST = Kind(
    "xgboost",
    description="XGBoost's gradient-boosted trees (XGBClassifier / XGBRegressor), "
    "categories and missing values handled natively.",
    classes=xgboost_kind.classes(),
    also_fitted_as=xgboost_kind.library_classes(),
    params=(
        P("n_estimators", N_EST, 100, "Boosting rounds."),
        P("max_depth", Int(0, 1000), 6, "Depth of each tree (0: no limit, hist only)."),
        P("learning_rate", POSITIVE, 0.3, "Shrinkage (eta)."),
        P("subsample", SHARE, 1.0, "Row share per round."),
        P("colsample_bytree", SHARE, 1.0, "Column share per tree."),
        P("min_child_weight", NON_NEG, 1.0, "Least hessian sum in a leaf."),
        P("gamma", NON_NEG, 0.0, "Least loss reduction of a split."),
        P("reg_lambda", NON_NEG, 1.0, "L2 penalty on leaf weights."),
        P("reg_alpha", NON_NEG, 0.0, "L1 penalty on leaf weights."),
        P("tree_method", Choice("hist", "approx", "exact"), "hist", "Split finding."),
        _objective(
            "objective",
            ("binary:logistic", "multi:softprob"),
            ("reg:squarederror", "reg:absoluteerror", "reg:pseudohubererror", "reg:quantileerror"),
        ),
        P(
            "quantile_alpha",
            OPEN_UNIT,
            0.5,
            "Quantile of reg:quantileerror.",
            tasks=("regression",),
        ),
        *_stopping(),
    ),
    fixed={"verbosity": 0, "importance_type": "gain"},
    size_param="n_estimators",
    native_categorical=True,
    native_max_categories=None,
    categorical_params=xgboost_kind.categorical_params,
    estimator_params=xgboost_kind.estimator_params,
    fit_rounds=xgboost_kind.fit_rounds,
    stages=Stages(xgboost_kind.rounds_kept, xgboost_kind.predict_at),
    library=Library("xgboost", "xgboost", "boosting"),
    # Its classifier is the service's subclass (the table's classes: xgboost_labels).
    libraries=("ensemble-service",),
    compiled="xgboost",
    rows_apart=True,
    explain=native.xgboost_attribution,
    raw_scores=native.xgboost_margin,
    **_TRAITS,  # type: ignore[arg-type]
)

LIGHTGBM = Kind(
    "lightgbm",
    description="LightGBM's gradient-boosted trees (LGBMClassifier / LGBMRegressor), "
    "categories and missing values handled natively.",
    classes=classes_of(
        "lightgbm", {"classification": "LGBMClassifier", "regression": "LGBMRegressor"}
    ),
    params=(
        P("n_estimators", N_EST, 100, "Boosting rounds."),
        P("num_leaves", Int(2, 131_072), 31, "Leaves per tree."),
        P("max_depth", Int(-1, 1000), -1, "Depth of each tree (-1 or 0: no limit)."),
        P("learning_rate", POSITIVE, 0.1, "Shrinkage."),
        P("subsample", SHARE, 1.0, "Row share per bagging (with subsample_freq > 0)."),
        P("subsample_freq", Int(0, MAX_N_ESTIMATORS), 0, "Bag rows every k rounds (0: off)."),
        P("colsample_bytree", SHARE, 1.0, "Column share per tree."),
        P("min_child_samples", Int(1), 20, "Least rows in a leaf."),
        P("reg_lambda", NON_NEG, 0.0, "L2 penalty on leaf values."),
        P("reg_alpha", NON_NEG, 0.0, "L1 penalty on leaf values."),
        _objective("objective", ("binary", "multiclass"), ("l2", "l1", "huber", "quantile")),
        P("alpha", OPEN_UNIT, 0.9, "Quantile (quantile) or delta (huber).", tasks=("regression",)),
        *_stopping(),
    ),
    # Deterministic for a given thread count (no timing-based choice of layout).
    fixed={"verbose": -1, "importance_type": "gain", "deterministic": True, "force_col_wise": True},
    size_param="n_estimators",
    native_categorical=True,
    native_max_categories=None,
    categorical_params=lightgbm_kind.categorical_params,
    estimator_params=lightgbm_kind.estimator_params,
    fit_rounds=lightgbm_kind.fit_rounds,
    stages=Stages(
        lightgbm_kind.rounds_kept, lightgbm_kind.predict_at, lightgbm_pass.staged_answers
    ),
    library=Library("lightgbm", "lightgbm", "boosting"),
    compiled="lightgbm",
    rows_apart=True,
    explain=native.lightgbm_attribution,
    raw_scores=native.lightgbm_margin,
    **_TRAITS,  # type: ignore[arg-type]
)

CATBOOST = Kind(
    "catboost",
    description="CatBoost's ordered boosting of oblivious trees (CatBoostClassifier / "
    "CatBoostRegressor), categories and missing values handled natively.",
    classes=classes_of(
        "catboost", {"classification": "CatBoostClassifier", "regression": "CatBoostRegressor"}
    ),
    params=(
        P("iterations", N_EST, 1000, "Boosting rounds."),
        P("depth", Int(1, 16), 6, "Depth of each (oblivious) tree."),
        P("learning_rate", (POSITIVE, NULL), None, "Shrinkage (null: CatBoost's choice)."),
        # Null: CatBoost's 3, unset (setting it turns off its automatic learning rate).
        P("l2_leaf_reg", (NON_NEG, NULL), None, "L2 penalty on leaf values (null: 3)."),
        _objective(
            "loss_function", ("Logloss", "MultiClass"), ("RMSE", "MAE", "Huber", "Quantile")
        ),
        P("delta", POSITIVE, 1.0, "Delta of the Huber loss.", tasks=("regression",)),
        P("alpha", OPEN_UNIT, 0.5, "Quantile of the Quantile loss.", tasks=("regression",)),
        *_stopping(),
    ),
    # CatBoost otherwise writes catboost_info/ into the working directory.
    fixed={"verbose": False, "allow_writing_files": False},
    size_param="iterations",
    native_categorical=True,
    native_max_categories=None,
    integer_categories=True,
    column_labels=True,
    categorical_params=catboost_kind.categorical_params,
    estimator_params=catboost_kind.estimator_params,
    fit_rounds=catboost_kind.fit_rounds,
    stages=Stages(catboost_kind.rounds_kept, catboost_kind.predict_at),
    library=Library("catboost", "catboost", "boosting"),
    explain=native.catboost_attribution,
    raw_scores=native.catboost_margin,
    # A fitted CatBoost model refuses set_params: it keeps the job's thread_count (its
    # predict takes all cores whatever it holds; only a refit of a clone reads it).
    **(_TRAITS | {"threads_param": None}),  # type: ignore[arg-type]
)

LIBRARY_KINDS: tuple[Kind, ...] = (XGBOOST, LIGHTGBM, CATBOOST)
