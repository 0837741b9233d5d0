"""``metrics.explanations`` of a big forest: its rows come from the trees' size (leaves x
depth² a row against a budget), never from a clock, so they are bounded and the same
spec and seed give the same rows and figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from ensembles.data import select_training_data, table_from_frame
from ensembles.explain import summary
from ensembles.explain.summary import MAX_ROWS, MIN_ROWS, summary_rows, tree_work
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble

HOLDOUT = EvaluationSpec(holdout_fraction=0.25, cv_folds=0)


def _steps(tree: object) -> float:
    t = tree.tree_  # type: ignore[attr-defined]
    return float(t.n_leaves * t.max_depth**2)


def test_tree_work_is_leaves_times_depth_squared_summed_over_the_trees() -> None:
    X, y = make_classification(n_samples=300, n_features=6, random_state=0)
    forest = RandomForestClassifier(n_estimators=4, random_state=0).fit(X, y)
    assert tree_work(forest) == sum(_steps(t) for t in forest.estimators_) > 0
    assert tree_work(make_pipeline(StandardScaler(), forest).fit(X, y)) > 0
    Xr, yr = make_regression(n_samples=200, n_features=5, random_state=0)
    boosted = GradientBoostingRegressor(n_estimators=5, random_state=0).fit(Xr, yr)
    assert tree_work(boosted) == sum(_steps(t) for t in boosted.estimators_.ravel())
    hist = HistGradientBoostingClassifier(max_iter=3).fit(X, y)
    nodes = [p.nodes for stage in hist._predictors for p in stage]
    assert tree_work(hist) == sum(n["is_leaf"].sum() * n["depth"].max() ** 2 for n in nodes)
    assert tree_work(KNeighborsRegressor().fit(Xr, yr)) == 0.0


def test_summary_rows_fit_the_budget_within_the_rows_there_are() -> None:
    budget = summary.WORK_BUDGET
    assert summary_rows(0.0, 800) == 800  # no trees: every row
    assert summary_rows(budget / 1_000, 1_000) == 1_000
    assert summary_rows(budget / 250, 1_000) == 250
    assert summary_rows(budget, 1_000) == MIN_ROWS  # a huge model: the floor
    assert summary_rows(budget, 4) == 4


def _table() -> pd.DataFrame:
    X, y = make_classification(
        n_samples=6_000, n_features=8, n_informative=5, flip_y=0.1, random_state=1
    )
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(8)])
    return frame.assign(target=np.where(y == 1, "yes", "no"))


def _train_forest(trees: int) -> FittedModel:
    data = select_training_data(table_from_frame(_table()), "target", task="classification")
    spec = parse_estimator_spec({"kind": "random_forest", "params": {"n_estimators": trees}})
    return train(data, resolve_ensemble(spec, data.task), HOLDOUT, 7)


def test_a_big_forest_summarises_the_rows_its_trees_allow_the_same_each_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A budget a 6-tree forest grown to its leaves on 4,500 rows overruns: fewer rows than
    the hold-out's 1,000, as many as its trees allow, the same twice, and said why."""
    monkeypatch.setattr(summary, "WORK_BUDGET", 2e7)
    first, again = _train_forest(6), _train_forest(6)
    block = first.metrics.explanations
    assert block is not None and block["method"] == "tree_shap"
    work = tree_work(first.pipeline[-1])
    assert first.training["n_holdout"] >= MAX_ROWS
    assert block["rows"] == max(MIN_ROWS, int(2e7 // work)) < MAX_ROWS
    assert block["rows"] * work <= max(2e7, MIN_ROWS * work)
    assert "TreeSHAP" in block["note"] and f"{block['rows']} of {MAX_ROWS}" in block["note"]
    assert f"metrics.explanations: {block['note']}" in first.metrics.notes
    assert again.metrics.explanations == block


def test_a_summary_of_every_hold_out_row_says_so_without_a_version_note() -> None:
    model = _train_forest(2)  # the real budget: 1,000 rows of these 2 trees fit in it
    block = model.metrics.explanations
    assert summary.WORK_BUDGET / tree_work(model.pipeline[-1]) > 2 * MAX_ROWS
    assert block is not None and block["rows"] == MAX_ROWS and "note" not in block
    assert not [n for n in model.metrics.notes if n.startswith("metrics.explanations")]
