"""Rows walked in the order of one tree's leaves give every row the answer it had.

The member pass and the compiled engine's check ask their trees for the rows sorted by
the leaf the first tree sends them to (:mod:`ensembles.leaf_order`); each figure they
make is compared, bit for bit, with the one made from the rows in the table's order.
Tables of a few thousand rows: below ``MIN_ROWS`` the rows keep their order.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    BaggingClassifier,
    GradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.tree import DecisionTreeClassifier

from ensembles import member_pass as member_pass_module
from ensembles.inference import compiling
from ensembles.inference.compiled import CompiledModel
from ensembles.leaf_order import MIN_ROWS, first_tree, leaf_order
from ensembles.member_pass import member_pass

N_ROWS = MIN_ROWS + 952


def _classified(n: int = N_ROWS) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(n_samples=n, n_features=8, n_informative=5, random_state=3)
    return X, y


@contextmanager
def _table_order(module: Any) -> Iterator[None]:
    """``module`` walks the rows in the table's order (the code before leaf_order)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "leaf_order", lambda _tree, _X: None)
        yield


def test_the_order_sorts_rows_by_leaf_and_is_undone_by_its_inverse() -> None:
    X, y = _classified()
    tree = DecisionTreeClassifier(random_state=0, min_samples_leaf=5).fit(X, y)
    order = leaf_order(tree, X)
    assert order is not None
    leaves = tree.apply(X.astype(np.float32))
    assert np.all(np.diff(leaves[order.order]) >= 0)
    assert np.array_equal(np.sort(order.order), np.arange(len(X)))
    assert np.array_equal(order.back(order.rows(X)), X)
    proba = tree.predict_proba(X)
    assert np.array_equal(order.back(tree.predict_proba(order.rows(X))), proba)


def test_few_rows_keep_their_order() -> None:
    X, y = _classified(MIN_ROWS - 1)
    tree = DecisionTreeClassifier(random_state=0).fit(X, y)
    assert leaf_order(tree, X) is None
    assert leaf_order(None, _classified()[0]) is None


def test_the_first_tree_is_read_from_the_kinds_that_have_one() -> None:
    X, y = _classified(300)
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert first_tree(forest) is forest.estimators_[0]
    boosted = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, y)
    assert first_tree(boosted) is boosted.estimators_[0, 0]
    tree = DecisionTreeClassifier(random_state=0).fit(X, y)
    assert first_tree(tree) is tree
    bagged = BaggingClassifier(n_estimators=3, max_features=0.5, random_state=0).fit(X, y)
    assert first_tree(bagged) is None  # its members see a subset of the columns
    assert first_tree(LogisticRegression().fit(X, y)) is None


def _pass_figures(ensemble: Any, X: np.ndarray, y: np.ndarray, task: Any) -> list[Any]:
    classes = list(getattr(ensemble, "classes_", []))
    rows = np.arange(0, len(y), 7)
    answered = member_pass(ensemble, X, y, task, classes, oob=True, sample=rows, max_sampled=5)
    assert answered.oob is not None and answered.sampled is not None
    return [
        answered.combined,
        answered.primaries,
        answered.oob.sums,
        answered.oob.counts,
        answered.oob.curve,
        answered.sampled.outputs,
        answered.sampled.valid,
    ]


def _forests() -> list[tuple[Any, np.ndarray, np.ndarray, str]]:
    X, y = _classified()
    Xr, yr = make_regression(n_samples=N_ROWS, n_features=6, noise=5.0, random_state=4)
    return [
        (RandomForestClassifier(n_estimators=12, random_state=1), X, y, "classification"),
        (RandomForestRegressor(n_estimators=8, random_state=1), Xr, yr, "regression"),
        (
            BaggingClassifier(
                DecisionTreeClassifier(), n_estimators=6, max_features=0.6, random_state=2
            ),
            X,
            y,
            "classification",
        ),
    ]


@pytest.mark.parametrize(
    ("ensemble", "X", "y", "task"), _forests(), ids=["forest", "regression", "bagged_trees"]
)
def test_the_pass_in_leaf_order_gives_the_figures_of_the_table_order(
    ensemble: Any, X: np.ndarray, y: np.ndarray, task: str
) -> None:
    ensemble.fit(X, y)
    ordered = _pass_figures(ensemble, X, y, task)
    with _table_order(member_pass_module):
        in_table_order = _pass_figures(ensemble, X, y, task)
    for new, old in zip(ordered, in_table_order, strict=True):
        if isinstance(new, np.ndarray):
            assert new.dtype == old.dtype
            assert np.array_equal(new, old)
        else:
            assert new == old
    expected = ensemble.predict_proba(X) if task == "classification" else ensemble.predict(X)
    assert np.array_equal(ordered[0], expected)


def test_the_pass_asks_its_trees_for_the_rows_in_the_first_trees_leaf_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y = _classified()
    forest = RandomForestClassifier(n_estimators=4, random_state=1).fit(X, y)
    asked: list[np.ndarray] = []
    own = DecisionTreeClassifier.predict_proba

    def spy(self: Any, rows: Any, check_input: bool = True) -> Any:
        asked.append(np.asarray(rows))
        return own(self, rows, check_input)

    monkeypatch.setattr(DecisionTreeClassifier, "predict_proba", spy)
    member_pass(forest, X, y, "classification", list(forest.classes_), oob=True, sample=None,
                max_sampled=0)  # fmt: skip
    leaves = forest.estimators_[0].apply(X.astype(np.float32))
    expected = X.astype(np.float32)[np.argsort(leaves, kind="stable")]
    assert len(asked) == 4
    assert all(np.array_equal(rows, expected) for rows in asked)


def _compiled_forest(X: np.ndarray, y: np.ndarray) -> tuple[Pipeline, pd.DataFrame]:
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])])
    pipeline = Pipeline(
        [
            ("prep", FunctionTransformer(np.asarray)),
            ("ensemble", RandomForestClassifier(n_estimators=10, random_state=0)),
        ]
    ).fit(frame, y)
    return pipeline, frame


def test_the_check_in_leaf_order_gives_the_report_of_the_table_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y = _classified()
    pipeline, frame = _compiled_forest(X, y)
    asked: list[int] = []
    scores = CompiledModel._scores

    def spy(self: CompiledModel, rows: np.ndarray) -> np.ndarray:
        asked.append(len(rows))
        tree = first_tree(self.estimator)
        assert tree is not None
        leaves = tree.apply(rows.astype(np.float32))
        assert np.all(np.diff(leaves) >= 0)  # in the first tree's leaf order
        return scores(self, rows)

    monkeypatch.setattr(CompiledModel, "_scores", spy)
    _, ordered = compiling.compile_model(pipeline, "classification", frame, 0, calibrate=False)
    assert asked and asked[0] >= MIN_ROWS
    monkeypatch.setattr(CompiledModel, "_scores", scores)
    with _table_order(compiling):
        _, in_table_order = compiling.compile_model(
            pipeline, "classification", frame, 0, calibrate=False
        )
    assert ordered.ok and in_table_order.ok
    assert ordered.max_abs_diff == in_table_order.max_abs_diff
    assert ordered.n_rows_checked == in_table_order.n_rows_checked


def test_a_failing_check_names_the_row_in_the_rows_own_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y = _classified()
    pipeline, frame = _compiled_forest(X, y)
    marked = float(np.float32(X[1234, 0]))  # the row whose label the engine gets wrong
    predict = CompiledModel.predict_with_proba

    def wrong(self: CompiledModel, rows: Any) -> tuple[np.ndarray, np.ndarray]:
        labels, proba = predict(self, rows)
        hit = np.asarray(rows)[:, 0].astype(np.float32) == np.float32(marked)
        labels = labels.copy()
        labels[hit] = 1 - labels[hit]
        return labels, proba

    monkeypatch.setattr(CompiledModel, "predict_with_proba", wrong)
    _, ordered = compiling.compile_model(pipeline, "classification", frame, 0, calibrate=False)
    with _table_order(compiling):
        _, in_table_order = compiling.compile_model(
            pipeline, "classification", frame, 0, calibrate=False
        )
    assert not ordered.ok
    assert ordered.reason == in_table_order.reason
    assert ordered.max_abs_diff == in_table_order.max_abs_diff
