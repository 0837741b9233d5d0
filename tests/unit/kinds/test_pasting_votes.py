"""pasting_votes: Breiman's Rvotes and Ivotes, their out-of-bag error, stopping, and what
the model becomes (a hard VotingClassifier / a VotingRegressor of its members).

The out-of-bag tallies are recomputed by hand from each member's bite; the sampling rule
of Ivotes is checked on a hand-made set of misjudged rows; the paper's claim that Ivotes
beats Rvotes at the same number of members is checked on digits, seed by seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import datasets
from sklearn.ensemble import VotingClassifier, VotingRegressor
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from ensembles.errors import TrainingCancelledError
from ensembles.kinds import PastingVotesClassifier, PastingVotesRegressor
from ensembles.kinds.pasting_votes import SMOOTHING, importance_bite, smoothed
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import check_against_rows, resolve_ensemble
from tests.unit.cancel import CancelAfter
from tests.unit.datasets import training_data

RS = 5
NO_EVAL = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)


def fit(dataset: str, params: dict[str, Any], **kw: Any) -> FittedModel:
    data = training_data(dataset)
    raw = {"kind": "pasting_votes", "params": params}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    return train(data, spec, kw.pop("evaluation", NO_EVAL), RS, **kw)


def oob_by_hand(model: Any, X: np.ndarray[Any, Any], codes: np.ndarray[Any, Any], k: int) -> Any:
    """r(k) after each member: votes of the members whose bite left the row out."""
    votes = np.zeros((len(X), k), dtype=np.int64)
    errors = []
    for member, bite in zip(model.ensemble_.estimators_, model.bites_, strict=True):
        out = np.ones(len(X), dtype=bool)
        out[bite] = False
        votes[np.flatnonzero(out), member.predict(X[out]).astype(int)] += 1
        voted = votes.sum(axis=1) > 0
        errors.append(float(np.mean(np.argmax(votes[voted], axis=1) != codes[voted])))
    return votes, errors


def test_the_oob_error_curve_equals_a_by_hand_computation_and_is_smoothed_as_breiman() -> None:
    X, y = datasets.load_wine(return_X_y=True)
    model = PastingVotesClassifier(
        DecisionTreeClassifier(random_state=RS), bite_size=30, max_estimators=12, random_state=RS
    ).fit(X, y)
    curves = {c["name"]: c for c in model.report_.curves}
    votes, raw = oob_by_hand(model, X, y, 3)
    assert curves["oob_error_raw"]["y"] == pytest.approx(raw, abs=1e-12)
    expected, e = [], None
    for r in raw:
        e = r if e is None else SMOOTHING * e + (1 - SMOOTHING) * r
        expected.append(e)
    assert curves["oob_error"]["y"] == pytest.approx(expected, abs=1e-12)
    assert curves["oob_error"]["x"] == list(range(1, len(raw) + 1))
    np.testing.assert_array_equal(model.report_.oob_sums, votes)
    assert model.report_.oob_sums.dtype == np.uint16  # tallies, not predictions, are kept
    assert smoothed(None, 0.3) == 0.3 and smoothed(0.2, 0.6) == pytest.approx(0.3)


def test_bites_have_bite_size_distinct_rows_and_every_member_is_in_the_vote() -> None:
    X, y = datasets.load_iris(return_X_y=True)
    model = PastingVotesClassifier(bite_size=20, max_estimators=8, random_state=RS).fit(X, y)
    assert all(len(np.unique(b)) == len(b) == 20 for b in model.bites_)
    voting = model.ensemble_
    assert isinstance(voting, VotingClassifier) and voting.voting == "hard"
    assert voting.weights is None and len(voting.estimators_) == len(model.bites_)
    member_votes = np.stack([m.predict(X) for m in voting.estimators_]).astype(int)
    counts = np.apply_along_axis(np.bincount, 0, member_votes, minlength=3)
    np.testing.assert_array_equal(model.predict(X), np.argmax(counts, axis=0))


def test_ivotes_keeps_misjudged_rows_always_and_others_with_the_given_probability() -> None:
    n = 100_000
    misjudged_rows = np.zeros(n, dtype=bool)
    misjudged_rows[:5000] = True  # 5% of the rows

    def misjudged(rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return misjudged_rows[rows]

    taken = np.zeros(n, dtype=bool)
    only_wrong = importance_bite(np.random.default_rng(0), n, 300, misjudged, 0.0, taken)
    assert len(np.unique(only_wrong)) == 300 and misjudged_rows[only_wrong].all()
    taken[:] = False
    bite = importance_bite(np.random.default_rng(1), n, 1000, misjudged, 0.1, taken)
    assert len(np.unique(bite)) == 1000 and taken[bite].all() and taken.sum() == 1000
    # Per draw: a misjudged row with probability 0.05, a kept correct one 0.95 * 0.1, so
    # about a third of the bite is misjudged (6 times their share of the table).
    share = misjudged_rows[bite].mean()
    assert share == pytest.approx(0.05 / (0.05 + 0.095), abs=0.05)


def test_growth_stops_when_the_smoothed_error_has_not_improved_for_patience_members() -> None:
    X, y = datasets.load_breast_cancer(return_X_y=True)
    model = PastingVotesClassifier(
        bite_size=60, patience=4, max_estimators=500, random_state=RS
    ).fit(X, y)
    stopping = model.report_.metrics["stopping"]
    e = next(c["y"] for c in model.report_.curves if c["name"] == "oob_error")
    k, best = stopping["n_estimators"], stopping["best_n_estimators"]
    assert stopping["reason"] == "patience" and k < 500
    assert k == len(e) == len(model.ensemble_.estimators_) == best + 4
    assert e[best - 1] == min(e) and all(v >= e[best - 1] for v in e[best:])
    assert stopping["best_oob_error"] == e[best - 1]


def test_max_estimators_bounds_the_growth() -> None:
    X, y = datasets.load_iris(return_X_y=True)
    model = PastingVotesClassifier(bite_size=40, patience=50, max_estimators=6).fit(X, y)
    assert model.report_.metrics["stopping"]["reason"] == "max_estimators"
    assert len(model.ensemble_.estimators_) == 6


def test_regression_averages_members_and_measures_the_squared_error() -> None:
    X, y = datasets.load_diabetes(return_X_y=True)
    model = PastingVotesRegressor(
        DecisionTreeRegressor(max_depth=4, random_state=RS), bite_size=80, max_estimators=10
    ).fit(X, y)
    voting = model.ensemble_
    assert isinstance(voting, VotingRegressor)
    members = np.stack([m.predict(X) for m in voting.estimators_])
    np.testing.assert_allclose(model.predict(X), members.mean(axis=0), rtol=0, atol=1e-9)
    sums, counts = np.zeros(len(y)), np.zeros(len(y))
    for member, bite in zip(voting.estimators_, model.bites_, strict=True):
        out = np.ones(len(y), dtype=bool)
        out[bite] = False
        sums[out] += member.predict(X[out])
        counts[out] += 1
    voted = counts > 0
    mse = float(np.mean((sums[voted] / counts[voted] - y[voted]) ** 2))
    raw = next(c["y"] for c in model.report_.curves if c["name"] == "oob_error_raw")
    assert raw[-1] == pytest.approx(mse, rel=1e-12)
    assert model.report_.metrics["stopping"]["sampling"] == "random"


def test_every_random_state_of_a_nested_member_is_seeded_and_the_fit_repeats() -> None:
    X, y = datasets.load_wine(return_X_y=True)

    def make() -> PastingVotesClassifier:
        return PastingVotesClassifier(
            DecisionTreeClassifier(max_features="sqrt"), bite_size=50, max_estimators=5
        ).set_params(random_state=11)

    first, second = make().fit(X, y), make().fit(X, y)
    seeds = [m.random_state for m in first.ensemble_.estimators_]
    assert all(isinstance(s, int) for s in seeds) and len(set(seeds)) == 5
    np.testing.assert_array_equal(first.predict(X), second.predict(X))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ivotes_beats_rvotes_at_the_same_number_of_members(seed: int) -> None:
    """Breiman (1999): importance sampling gives a lower test error than random bites.
    On digits with bites of 100 rows and 30 members, every seed (gap about 3 points)."""
    X, y = datasets.load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, random_state=seed, stratify=y
    )
    errors = {}
    for sampling in ("random", "importance"):
        model = PastingVotesClassifier(
            DecisionTreeClassifier(),
            bite_size=100,
            sampling=sampling,
            patience=30,
            max_estimators=30,
            random_state=seed,
        ).fit(X_train, y_train)
        assert len(model.ensemble_.estimators_) == 30
        errors[sampling] = float(np.mean(model.predict(X_test) != y_test))
    assert errors["importance"] < errors["random"], errors


# --- through training: metrics, progress, cancel ---------------------------------------


def test_training_reports_curves_stopping_oob_and_member_spread() -> None:
    model = fit("breast_cancer", {"bite_size": 80, "patience": 5, "max_estimators": 40})
    m = model.metrics
    assert m.stopping is not None and m.stopping["n_estimators"] == model.training["n_estimators"]
    names = [c.name for c in m.curves]
    assert names == ["oob_error", "oob_error_raw"]
    e = m.curves[0]
    assert e.x_label == "members" and len(e.y) == m.stopping["n_estimators"]
    assert m.oob is not None and m.oob["n_scored"] == 569
    assert 1 - m.oob["accuracy"] == pytest.approx(m.curves[1].y[-1], abs=1e-12)
    assert m.curve is not None and m.curve["basis"] == "oob"
    assert m.curve["points"][-1]["score"] == pytest.approx(m.oob["accuracy"])
    assert m.estimators[0]["n_members"] == m.stopping["n_estimators"]
    assert type(model.pipeline[-1]) is VotingClassifier
    assert model.signature.voting == "hard"
    assert model.feature_importances is not None


def test_training_reports_progress_per_member() -> None:
    seen: list[tuple[int, int, str]] = []
    fit(
        "wine",
        {"bite_size": 40, "max_estimators": 7, "patience": 7},
        on_progress=lambda *a: seen.append(a),
    )
    fitting = [(d, t) for d, t, s in seen if s == "fitting"]
    assert fitting[-1] == (7, 7)
    assert [d for d, _ in fitting] == list(range(8))  # before each member, and at the end


def test_a_cancelled_pasting_votes_stops_between_members() -> None:
    token = CancelAfter(4)
    with pytest.raises(TrainingCancelledError):
        fit(
            "wine",
            {"bite_size": 40, "max_estimators": 5000, "patience": 5000},
            on_progress=token.tick,
            cancel=token,
        )
    assert token.left <= 0


def test_a_member_that_cannot_fit_a_bite_is_refused_before_training() -> None:
    data = training_data("wine")
    raw = {
        "kind": "pasting_votes",
        "params": {"bite_size": 20},
        "estimator": {"kind": "knn", "params": {"n_neighbors": 25}},
    }
    spec = resolve_ensemble(parse_estimator_spec(raw), "classification")
    problems = check_against_rows(spec, NO_EVAL, data.y, "classification", RS)
    assert [p.loc for p in problems] == [("ensemble", "estimator", "params", "n_neighbors")]
    assert "bite of 20" in problems[0].msg
