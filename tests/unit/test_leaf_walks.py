"""A forest's leaves walked beside the explanation summary (``ensembles.leaf_walks``).

The answers read from walked leaves are the trees' own, bit for bit; the pass that reads
them gives every figure the pass without them gives; ``train()`` explains a forest first
with its trees walked meanwhile, and the version is the same as the other way round.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from ensembles import evaluation, training
from ensembles.explain import summary as summary_module
from ensembles.leaf_walks import LeafWalks, answer_from_leaves
from ensembles.member_pass import member_pass, walk_ahead
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data
from tests.unit.test_member_pass import _fitted

RS = 5
WAIT_S = 60.0


def _rows(n: int = 3_000, features: int = 6) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, features)).astype(np.float32)
    return X, X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(scale=0.3, size=n)


@pytest.mark.parametrize("classes", [2, 3, 5])
def test_answers_from_leaves_are_the_trees_own(classes: int) -> None:
    X, target = _rows()
    y = np.digitize(target, np.quantile(target, np.linspace(0, 1, classes + 1)[1:-1]))
    forest = RandomForestClassifier(n_estimators=8, random_state=RS).fit(X, y)
    walks = LeafWalks(forest.estimators_, X).start()
    assert _walked(walks, len(forest.estimators_))
    walks.stop()
    for i, tree in enumerate(forest.estimators_):
        leaves = walks.take(i)
        assert leaves is not None and leaves.dtype == np.uint16
        read = answer_from_leaves(tree, leaves, classifier=True)
        own = tree.predict_proba(X, check_input=False)
        assert read.dtype == own.dtype and read.shape == own.shape
        np.testing.assert_array_equal(read, own)


def test_answers_from_leaves_are_a_regressors_own() -> None:
    X, y = _rows()
    forest = RandomForestRegressor(n_estimators=6, random_state=RS).fit(X, y)
    walks = LeafWalks(forest.estimators_, X).start()
    assert _walked(walks, len(forest.estimators_))
    walks.stop()
    for i, tree in enumerate(forest.estimators_):
        leaves = walks.take(i)
        assert leaves is not None
        read = answer_from_leaves(tree, leaves, classifier=False)
        np.testing.assert_array_equal(read, tree.predict(X, check_input=False))


def test_walks_keep_to_their_budget_and_stop() -> None:
    X, y = _rows()
    forest = RandomForestRegressor(n_estimators=10, random_state=RS).fit(X, y)
    per_tree = X.shape[0] * 2  # uint16 leaves
    walks = LeafWalks(forest.estimators_, X, budget=3 * per_tree).start()
    walks._thread.join(WAIT_S)
    assert len(walks) == 3  # from the last tree back
    assert [walks.take(i) is not None for i in range(10)] == [False] * 7 + [True] * 3
    assert walks.given == 3 and len(walks) == 0
    taken = LeafWalks(forest.estimators_, X)
    assert taken.take(9) is None and taken.take(4) is None  # the pass's own from now
    taken.start()._thread.join(WAIT_S)
    assert len(taken) == 8 and taken.take(9) is None and taken.take(8) is not None
    stopped = LeafWalks(forest.estimators_, X)
    stopped.stop()
    stopped.start()._thread.join(WAIT_S)
    assert len(stopped) == 0


@pytest.mark.parametrize(
    ("dataset", "raw"),
    [
        ("wine", {"kind": "random_forest", "params": {"n_estimators": 30}}),
        ("wine", {"kind": "extra_trees", "params": {"n_estimators": 20, "bootstrap": True}}),
        ("diabetes", {"kind": "random_forest", "params": {"n_estimators": 25}}),
    ],
)
def test_a_pass_on_walked_leaves_gives_the_same_figures(dataset: str, raw: dict[str, Any]) -> None:
    fit, rows, run = _fitted(dataset, raw, 0.0)
    sample = np.arange(0, len(rows.y_train), 3)
    with run.predicting():
        plain = member_pass(
            fit.ensemble, fit.Xt, rows.y_train, fit.task, fit.classes,
            oob=True, sample=sample, max_sampled=7,
        )  # fmt: skip
        ahead = walk_ahead(fit.ensemble, fit.Xt)
        assert ahead is not None and _walked(ahead.walks, len(fit.ensemble.estimators_))
        calls = _count_applies(fit.ensemble)
        walked = member_pass(
            fit.ensemble, fit.Xt, rows.y_train, fit.task, fit.classes,
            oob=True, sample=sample, max_sampled=7, ahead=ahead,
        )  # fmt: skip
    assert calls == [0]  # every answer read from its leaves: no tree walked again
    np.testing.assert_array_equal(walked.combined, plain.combined)
    assert walked.primaries == plain.primaries
    assert walked.oob_tallies() is not None and plain.oob_tallies() is not None
    for a, b in zip(walked.oob_tallies() or (), plain.oob_tallies() or (), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert walked.sampled is not None and plain.sampled is not None
    np.testing.assert_array_equal(walked.sampled.outputs, plain.sampled.outputs)


def test_a_forest_is_explained_first_with_its_trees_walked_beside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The summary (shap's TreeSHAP: the GIL on one core) runs before the figures, with
    the trees' leaves walked beside it, and the pass reads them (fails on the code
    before: the figures came first, nothing was walked); the version is the one the
    other order gives: metrics (notes in their order), importances, training counts."""
    data = training_data("breast_cancer")
    raw = {"kind": "random_forest", "params": {"n_estimators": 16}}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    evaluation_spec = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
    events: list[str] = []
    made: list[Any] = []
    real_summary, real_scores = summary_module.explanation_summary, evaluation.score_fit
    real_walks = evaluation.walks_ahead

    def walks(*args: Any) -> Any:
        events.append("walks")
        made.append(real_walks(*args))
        return made[-1]

    def summary(*args: Any, **kwargs: Any) -> Any:
        ahead = made[-1] if made else None
        going = ahead is not None and not ahead.walks._stop.is_set()
        events.append(f"summary, walks going: {going}")
        if ahead is not None:  # let it walk every tree: the pass then reads them all
            ahead.walks._thread.join(WAIT_S)
        return real_summary(*args, **kwargs)

    def scores(*args: Any, **kwargs: Any) -> Any:
        events.append("figures")
        return real_scores(*args, **kwargs)

    monkeypatch.setattr(training, "explanation_summary", summary)
    monkeypatch.setattr(training, "score_fit", scores)
    monkeypatch.setattr(training, "walks_ahead", walks)
    walked = train(data, spec, evaluation_spec, RS, pool=MemberPool.local(2))
    assert events == ["walks", "summary, walks going: True", "figures"]
    assert walked.training["walked_ahead"] == 16
    events.clear()
    made.clear()
    monkeypatch.setattr(training, "walks_ahead", lambda *_args: None)  # the order before
    before = train(data, spec, evaluation_spec, RS, pool=MemberPool.local(2))
    assert events == ["figures", "summary, walks going: False"]
    assert walked.metrics.model_dump() == before.metrics.model_dump()
    assert walked.metrics.notes == before.metrics.notes
    assert walked.feature_importances == before.feature_importances
    assert {k: v for k, v in walked.training.items() if not k.endswith(("_s", "ahead"))} == {
        k: v for k, v in before.training.items() if not k.endswith(("_s", "ahead"))
    }


def _walked(walks: LeafWalks, trees: int) -> bool:
    """Wait until every tree is walked (the walker runs at the lowest priority)."""
    deadline = time.monotonic() + WAIT_S
    while len(walks) < trees and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(walks) == trees


def _count_applies(forest: Any) -> list[int]:
    """Count the trees' own ``predict_proba`` / ``predict`` calls from now on."""
    calls = [0]
    for tree in forest.estimators_:
        for name in ("predict_proba", "predict"):
            real = getattr(tree, name, None)
            if real is None:
                continue

            def counted(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
                calls[0] += 1
                return _real(*args, **kwargs)

            setattr(tree, name, counted)
    return calls
