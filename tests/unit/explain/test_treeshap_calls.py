"""shap's TreeSHAP in calls of bounded work (ensembles.explain.treeshap.calls): its C code
holds the GIL for a whole call, so a big model's rows are explained a row (and a group of
trees) at a time, with the very contributions of one call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

from ensembles.explain import treeshap
from ensembles.explain.trees import _boosting_model, _tables
from ensembles.explain.treeshap import calls, dense


def _covered(plan: list[tuple[slice, slice]], n_rows: int, n_trees: int) -> list[tuple[int, int]]:
    return [
        (row, tree)
        for rows, trees in plan
        for row in range(n_rows)[rows]
        for tree in range(n_trees)[trees]
    ]


def test_each_row_meets_each_tree_once_in_row_then_tree_order() -> None:
    steps = np.array([4.0, 1.0, 3.0, 2.0, 5.0])  # 15 steps a row
    budget = treeshap.CALL_STEPS
    assert calls(steps * budget / 100, 6) == [(slice(0, 6), slice(0, 5))]  # one call
    by_rows = calls(steps * budget / 45, 7)  # three rows a call
    assert [rows for rows, _ in by_rows] == [slice(0, 3), slice(3, 6), slice(6, 9)]
    by_trees = calls(steps * budget / 6, 2)  # a row's trees in groups of at most 6 steps
    groups = [slice(0, 2), slice(2, 4), slice(4, 5)]
    assert [trees for _, trees in by_trees] == [*groups, *groups]
    for plan, rows in ((by_rows, 7), (by_trees, 2), (calls(steps * budget, 3), 3)):
        pairs = _covered(plan, rows, len(steps))
        assert pairs == sorted(pairs) == [(r, t) for r in range(rows) for t in range(5)]
    assert calls(steps * budget * 2, 1) == [(slice(0, 1), slice(i, i + 1)) for i in range(5)]


def _model(name: str) -> tuple[Any, np.ndarray]:
    X, y = make_classification(
        n_samples=400, n_features=6, n_informative=4, n_classes=3, random_state=0
    )
    if name == "forest":
        X[::17, 2] = np.nan
        return RandomForestClassifier(n_estimators=7, random_state=0).fit(X, y), X[:25]
    return GradientBoostingClassifier(n_estimators=4, random_state=0).fit(X, y), X[:25]


class _Counting:
    """shap's extension, counting the rows of each TreeSHAP call."""

    def __init__(self) -> None:
        self.real = treeshap.extension()
        self.rows: list[int] = []

    def dense_tree_shap(self, *args: Any) -> Any:
        self.rows.append(len(args[9]))
        return self.real.dense_tree_shap(*args)


@pytest.mark.parametrize("name", ["forest", "boosting"])
@pytest.mark.parametrize("budget", [1.0, 3e3, 2e4], ids=["tree_by_tree", "trees", "rows"])
def test_calls_of_bounded_work_give_the_contributions_of_one_call(
    monkeypatch: pytest.MonkeyPatch, name: str, budget: float
) -> None:
    model, rows = _model(name)
    tables = _tables(model, "forest") if name == "forest" else _boosting_model(model, rows)
    trees = dense(tables)
    whole = trees.attribution(rows)
    counting = _Counting()
    monkeypatch.setattr(treeshap, "CALL_STEPS", budget)
    monkeypatch.setattr(treeshap, "extension", lambda: counting)
    parts = trees.attribution(rows)
    assert len(counting.rows) > 1 and sum(counting.rows) >= len(rows)
    assert np.array_equal(parts.phi, whole.phi)
    assert np.array_equal(parts.base, whole.base)
