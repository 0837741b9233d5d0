"""The boosting libraries' kinds, as data: XGBoost and LightGBM (issue 22).

Minimal entries, enough for ``kind_of`` to place a fitted library estimator and for the
compiled engine to read its ``compiled`` trait; the full entries (every parameter, the
training traits, CatBoost) come with the kinds themselves.
"""

from __future__ import annotations

import lightgbm
import xgboost

from ensembles.catalog.params import MAX_N_ESTIMATORS, Int, Num, P
from ensembles.catalog.traits import Kind

LIBRARY_KINDS: tuple[Kind, ...] = (
    Kind(
        "xgboost",
        "ensemble",
        "XGBoost's gradient-boosted trees.",
        {"classification": xgboost.XGBClassifier, "regression": xgboost.XGBRegressor},
        params=(
            P("n_estimators", Int(1, MAX_N_ESTIMATORS), 100, "Boosting rounds."),
            P("max_depth", Int(0, 1000), 6, "Depth of each tree."),
            P("learning_rate", Num(0, lo_open=True), 0.3, "Shrinkage of each round."),
        ),
        size_param="n_estimators",
        combination="sum",
        labels="argmax",
        compiled="xgboost",
    ),
    Kind(
        "lightgbm",
        "ensemble",
        "LightGBM's gradient-boosted trees.",
        {"classification": lightgbm.LGBMClassifier, "regression": lightgbm.LGBMRegressor},
        params=(
            P("n_estimators", Int(1, MAX_N_ESTIMATORS), 100, "Boosting rounds."),
            P("num_leaves", Int(2, 131_072), 31, "Leaves per tree."),
            P("learning_rate", Num(0, lo_open=True), 0.1, "Shrinkage of each round."),
        ),
        size_param="n_estimators",
        combination="sum",
        labels="argmax",
        compiled="lightgbm",
    ),
)
