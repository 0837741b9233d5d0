"""One pass of a forest's or bagging ensemble's members gives every training figure.

Each figure the pass makes (scores on the training and hold-out rows, OOB and its curve,
the members' own scores, regression's predicted-vs-actual pairs, the diversity block) is
compared, bit for bit, with the same figure made by its own predictions as before, and
the ensemble's answer in the pass with scikit-learn's ``predict_proba`` / ``predict``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from joblib import parallel_config

from ensembles import evaluation
from ensembles.member_pass import member_pass
from ensembles.members import members_of
from ensembles.parallel import MemberPool
from ensembles.science import measures
from ensembles.specs import parse_estimator_spec
from ensembles.training import _fit, _split
from ensembles.training_run import Run
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

RS = 5

CASES = [
    ("wine", {"kind": "random_forest", "params": {"n_estimators": 30}}),
    ("wine", {"kind": "extra_trees", "params": {"n_estimators": 20, "bootstrap": True}}),
    ("wine", {"kind": "extra_trees", "params": {"n_estimators": 12}}),  # no OOB rows
    ("iris", {"kind": "bagging", "params": {"n_estimators": 15, "max_features": 0.6}}),
    ("iris", {"kind": "bagging", "params": {"n_estimators": 9}, "estimator": {"kind": "knn"}}),
    ("iris", {"kind": "pasting", "params": {"n_estimators": 10, "max_samples": 0.5}}),
    ("wine", {"kind": "random_patches", "params": {"n_estimators": 11}}),
    ("diabetes", {"kind": "random_forest", "params": {"n_estimators": 25}}),
    ("diabetes", {"kind": "bagging", "params": {"n_estimators": 10}}),
]


def _fitted(dataset: str, raw: dict[str, Any], holdout: float) -> tuple[Any, Any, Run]:
    data = training_data(dataset)
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    run = Run(None, None, MemberPool.local(2))
    rows = _split(data, holdout, RS, [])
    return _fit(data, spec, rows, RS, run, []), rows, run


def _science(fit: Any, rows: Any, scores: evaluation.Scores) -> dict[str, Any]:
    evidence = measures.Evidence(
        pipeline=fit.pipeline,
        kind=fit.kind,
        task=fit.task,
        classes=fit.classes,
        Xt=fit.Xt,
        y_train=rows.y_train,
        train_positions=rows.positions,
        Xht=scores.Xbt if rows.X_hold is not None else None,
        y_hold=rows.y_hold,
        oob=scores.oob,
        cv_folds=None,
        random_state=RS,
        judged=scores.judged,
    )
    return measures.measure(evidence, [])


@pytest.mark.parametrize("holdout", [0.0, 0.25])
@pytest.mark.parametrize(("dataset", "raw"), CASES, ids=lambda c: str(c)[:60])
def test_one_pass_gives_the_figures_their_own_predictions_gave(
    dataset: str, raw: dict[str, Any], holdout: float
) -> None:
    fit, rows, run = _fitted(dataset, raw, holdout)
    shared_notes: list[str] = []
    with run.predicting():  # the pass on two threads, summing in member order
        shared = evaluation.score_fit(fit, rows, RS, shared_notes)
    assert shared.judged is not None or holdout == 0.0
    separate_notes: list[str] = []
    with parallel_config(backend="sequential"):  # scikit-learn summing in member order
        separate = evaluation._score_each(fit, rows, RS, separate_notes)
    for name in ("on_train", "holdout", "oob", "members", "curve", "extra"):
        assert getattr(shared, name) == getattr(separate, name), name
    assert shared_notes == separate_notes
    np.testing.assert_array_equal(shared.Xbt, separate.Xbt)
    assert _science(fit, rows, shared) == _science(fit, rows, separate)


@pytest.mark.parametrize(("dataset", "raw"), CASES, ids=lambda c: str(c)[:60])
def test_the_pass_answers_as_the_ensemble_does(dataset: str, raw: dict[str, Any]) -> None:
    fit, rows, run = _fitted(dataset, raw, 0.0)
    with run.predicting():
        answered = member_pass(
            fit.ensemble, fit.Xt, rows.y_train, fit.task, fit.classes,
            oob=True, sample=None, max_sampled=0,
        )  # fmt: skip
    with parallel_config(backend="sequential"):
        if fit.task == "classification":
            expected = fit.ensemble.predict_proba(fit.Xt)
            np.testing.assert_array_equal(
                answered.labels(fit.ensemble.classes_), fit.ensemble.predict(fit.Xt)
            )
        else:
            expected = fit.ensemble.predict(fit.Xt)
    np.testing.assert_array_equal(answered.combined, expected)


@contextmanager
def _counting(estimators: list[Any]) -> Iterator[dict[str, int]]:
    """Count the calls to each estimator's predict and predict_proba (by wrapping the
    bound methods of these instances; the estimators answer as before)."""
    calls: dict[str, int] = {}

    def counted(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return method(*args, **kwargs)

        return call

    for i, est in enumerate(estimators):
        for method in ("predict", "predict_proba"):
            setattr(est, method, counted(f"{i}.{method}", getattr(est, method)))
    try:
        yield calls
    finally:
        for est in estimators:
            for method in ("predict", "predict_proba"):
                del est.__dict__[method]


@pytest.mark.parametrize("holdout", [0.0, 0.25])
def test_each_member_answers_once_per_set_of_rows(holdout: float) -> None:
    """Scores, OOB, curve, members' scores and diversity from one call per member on the
    training rows, and one on the hold-out rows."""
    fit, rows, run = _fitted(
        "wine", {"kind": "random_forest", "params": {"n_estimators": 8}}, holdout
    )
    trees = [m.estimator for m in members_of(fit.ensemble, with_samples=False)]
    with _counting(trees) as calls, run.predicting():
        scores = evaluation.score_fit(fit, rows, RS, [])
        _science(fit, rows, scores)
    sets = 1 if holdout == 0.0 else 2
    assert calls == {f"{i}.predict_proba": sets for i in range(len(trees))}


def test_a_pass_over_no_tree_members_takes_their_own_labels() -> None:
    """KNN members: their class is their ``predict``, asked beside their probabilities."""
    raw = {"kind": "bagging", "params": {"n_estimators": 4}, "estimator": {"kind": "knn"}}
    fit, rows, run = _fitted("iris", raw, 0.0)
    members = members_of(fit.ensemble, with_samples=False)
    with _counting([m.estimator for m in members]) as calls, run.predicting():
        evaluation.score_fit(fit, rows, RS, [])
    assert all(calls[f"{i}.predict"] == 1 for i in range(len(members)))
    assert all(calls[f"{i}.predict_proba"] == 1 for i in range(len(members)))


def test_the_pass_is_used_only_where_it_applies() -> None:
    """Boosting is scored by its own predictions (no pass, no judged outputs)."""
    fit, rows, run = _fitted(
        "wine", {"kind": "gradient_boosting", "params": {"n_estimators": 5}}, 0.25
    )
    with run.predicting():
        scores = evaluation.score_fit(fit, rows, RS, [])
    assert scores.judged is None


def _forest_and_rows() -> tuple[Any, np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    X, y = make_classification(n_samples=400, n_features=6, random_state=2)
    return RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y), X, y


def test_finite_rows_are_checked_once_not_by_each_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    from sklearn.tree import DecisionTreeClassifier

    forest, X, y = _forest_and_rows()
    expected = forest.predict_proba(X)
    asked: list[bool] = []
    own = DecisionTreeClassifier.predict_proba

    def spy(self: Any, rows: Any, check_input: bool = True) -> Any:
        asked.append(check_input)
        return own(self, rows, check_input)

    monkeypatch.setattr(DecisionTreeClassifier, "predict_proba", spy)
    answered = member_pass(
        forest, X, y, "classification", list(forest.classes_), oob=True, sample=None,
        max_sampled=0,
    )  # fmt: skip
    assert asked == [False] * 5
    assert np.array_equal(answered.combined, expected)


def test_rows_a_tree_refuses_are_refused_as_before() -> None:
    forest, X, y = _forest_and_rows()
    X = X.copy()
    X[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        member_pass(
            forest, X, y, "classification", list(forest.classes_), oob=False, sample=None,
            max_sampled=0,
        )  # fmt: skip
