"""adaboost_mh: Schapire & Singer's AdaBoost.MH against a three-round run worked by hand,
its bound against its training Hamming loss, the exact stump against every cut, and the
kind through training (curves, hardest rows, progress, cancel, nesting, lineage)."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_iris, load_wine

from ensembles.data import select_training_data, table_from_frame
from ensembles.errors import SpecError, TrainingCancelledError
from ensembles.jobs import library_versions
from ensembles.kinds.adaboost_mh import AdaBoostMHClassifier, explanation, shap_tables
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.unit.cancel import CancelAfter
from tests.unit.datasets import training_data

NO_EVAL = EvaluationSpec(holdout_fraction=0.0, cv_folds=0)
HOLDOUT = EvaluationSpec(holdout_fraction=0.25, cv_folds=0)
R6 = math.sqrt(6)


def fit(data: Any, raw: dict[str, Any], evaluation: EvaluationSpec = NO_EVAL, **kw: Any) -> Any:
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    return train(data, spec, evaluation, 3, **kw)


def six_rows() -> Any:
    table = pd.DataFrame({"x": [1.0, 2, 3, 4, 5, 6], "y": ["a", "a", "a", "b", "b", "c"]})
    return select_training_data(table_from_frame(table), "y")


# Y_il of the six rows: +1 for the row's class (a, b, c), else -1.
SIGNS = np.array([[1, -1, -1]] * 3 + [[-1, 1, -1]] * 2 + [[-1, -1, 1]], dtype=float)


def test_three_rounds_by_hand() -> None:
    """Six rows, one feature x = 1..6, classes a a a b b c; 18 pairs, D_1 = 1/18 each,
    eps = 1/(6*3) = 1/18.

    Round 1, Z = 2 sum sqrt(W+ W-) per cut (units 1/18): 1.5: 2(2 + 2 sqrt 6) = 0.767;
    2.5: 2(2 sqrt 3 + 2) = 0.607; 3.5: rows 1-3 are pure, rows 4-6 give sqrt(2*1) for b
    and sqrt(1*2) for c: 4 sqrt 2 / 18 = 0.314; 4.5: 0.607; 5.5: 4 sqrt 6 / 18 = 0.544.
    So x <= 3.5. Left: a has W+ = 3/18, W- = 0: c = 1/2 ln((3+1)/(0+1)) = ln 2; b and c
    -ln 2. Right: a -ln 2, b 1/2 ln((2+1)/(1+1)) = 1/2 ln 3/2, c -1/2 ln 3/2.
    Every pair of rows 1-3 and every a-pair is multiplied by e^-ln2 = 1/2; the b and c
    pairs of rows 4-5 by sqrt(2/3) = sqrt6/3; row 6's b and c pairs (both wrong) by
    sqrt(3/2) = sqrt6/2. Z_1 = (12 * 1/2 + 4 sqrt6/3 + 2 sqrt6/2)/18 = (18 + 7 sqrt 6)/54.
    Hamming loss: row 6's two pairs, 2/18 = 1/9.

    Round 2 on those weights (S = 6 + 7 sqrt6/3, D_2 = V/S with V the products above):
    the cut at 5.5 gives 2 (sqrt(3/2) + sqrt(sqrt 6)) / S = 0.4763, below 3.5's
    2 * 2 sqrt 2 / S = 0.4829 (1.5: 0.841, 2.5: 0.710, 4.5: 0.678). Scores
    1/2 ln((18 W+ + S)/(18 W- + S)) in V units: left a (3/2, 1), b (2 sqrt6/3, 3/2),
    c (0, 3/2 + 2 sqrt6/3); right a (0, 1/2), b (0, sqrt6/2), c (sqrt6/2, 0).

    Round 3: weights and cut (3.5 again: 0.406, against 0.641 at 5.5) from the table.
    """
    model = fit(six_rows(), {"kind": "adaboost_mh", "params": {"n_estimators": 3}})
    mh = model.pipeline[-1]
    s = 6 + 7 * R6 / 3
    half = 0.5

    def score(w_pos: float, w_neg: float) -> float:  # V units, D = V / s, eps = 1/18
        return half * math.log((18 * w_pos + s) / (18 * w_neg + s))

    h1 = np.array(
        [[math.log(2), -math.log(2), -math.log(2)]] * 3
        + [[-math.log(2), half * math.log(1.5), -half * math.log(1.5)]] * 3
    )
    left2 = [score(3 / 2, 1), score(2 * R6 / 3, 3 / 2), score(0, 3 / 2 + 2 * R6 / 3)]
    right2 = [score(0, 1 / 2), score(0, R6 / 2), score(R6 / 2, 0)]
    h2 = np.array([left2] * 5 + [right2])
    v2 = np.array([[half] * 3] * 3 + [[half, R6 / 3, R6 / 3]] * 2 + [[half, R6 / 2, R6 / 2]])
    assert v2.sum() == pytest.approx(s)
    d2 = v2 / s
    u3 = d2 * np.exp(-SIGNS * h2)
    z2 = u3.sum()
    d3 = u3 / z2
    # Round 3: x <= 3.5; W± per leaf and class summed from the table.
    blocks = (slice(0, 3), slice(3, 6))
    h3 = np.zeros((6, 3))
    for rows in blocks:
        w_pos = (d3[rows] * (SIGNS[rows] > 0)).sum(axis=0)
        w_neg = (d3[rows] * (SIGNS[rows] < 0)).sum(axis=0)
        h3[rows] = half * np.log((w_pos + 1 / 18) / (w_neg + 1 / 18))
    u4 = d3 * np.exp(-SIGNS * h3)
    z3 = u4.sum()
    d4 = u4 / z3

    assert mh.smoothing_ == pytest.approx(1 / 18)
    assert mh.tree_threshold_[mh.roots_].tolist() == [3.5, 5.5, 3.5]
    for t, h in enumerate((h1, h2, h3)):
        root = mh.roots_[t]
        left, right = mh.tree_left_[root], mh.tree_right_[root]
        np.testing.assert_allclose(mh.tree_value_[left], h[0], rtol=1e-12)
        np.testing.assert_allclose(mh.tree_value_[right], h[5], rtol=1e-12)
    z1 = (18 + 7 * R6) / 54
    np.testing.assert_allclose(mh.normalizers_, [z1, z2, z3], rtol=1e-12)
    assert z2 == pytest.approx(0.742976, abs=1e-6) and z3 == pytest.approx(0.706142, abs=1e-6)
    np.testing.assert_allclose(mh.train_hamming_loss_, [1 / 9, 0, 0], atol=1e-15)

    f = h1 + h2 + h3
    X = np.arange(1.0, 7.0)[:, np.newaxis]
    np.testing.assert_allclose(mh.class_scores(X), f, rtol=1e-12)
    assert mh.predict(X).tolist() == ["a", "a", "a", "b", "b", "c"]
    sigma = 1 / (1 + np.exp(-2 * f))
    np.testing.assert_allclose(mh.predict_proba(X), sigma / sigma.sum(axis=1, keepdims=True))

    curves = {c.name: c for c in model.metrics.curves}
    assert curves["train_hamming_loss"].y == pytest.approx([1 / 9, 0, 0])
    assert curves["hamming_loss_bound"].y == pytest.approx([z1, z1 * z2, z1 * z2 * z3])
    assert curves["hamming_loss_bound"].x == [1, 2, 3]

    block = model.metrics.hardest_rows
    assert block is not None
    final = d4.sum(axis=1)  # each row's weight over its classes
    assert [r["row"] for r in block["rows"]] == [5, 3, 4, 0, 1, 2]
    assert [r["weight"] for r in block["rows"]] == pytest.approx(final[[5, 3, 4, 0, 1, 2]])
    assert final[5] == pytest.approx(0.299059, abs=1e-6)
    assert block["rows"][0] == {"row": 5, "weight": pytest.approx(final[5]), "target": "c",
                                "predicted": "c"}  # fmt: skip
    assert block["n_members"] == 3 and block["weight_share"] == pytest.approx(1.0)


def test_the_learning_rate_scales_the_scores_and_the_normaliser_follows() -> None:
    """Round 1 of the six rows at learning_rate 1/2: half the scores, so the pairs are
    multiplied by 2^-1/2, (2/3)^1/4 and (3/2)^1/4 instead."""
    raw = {"kind": "adaboost_mh", "params": {"n_estimators": 1, "learning_rate": 0.5}}
    model = fit(six_rows(), raw)
    mh = model.pipeline[-1]
    left = mh.tree_left_[mh.roots_[0]]
    half_ln2 = 0.5 * math.log(2)
    assert mh.tree_value_[left].tolist() == pytest.approx([half_ln2, -half_ln2, -half_ln2])
    z1 = (12 * 2**-0.5 + 4 * (2 / 3) ** 0.25 + 2 * 1.5**0.25) / 18
    assert mh.normalizers_[0] == pytest.approx(z1, rel=1e-12)


@pytest.mark.parametrize("loader", [load_iris, load_wine, load_breast_cancer])
@pytest.mark.parametrize(("depth", "rate"), [(1, 1.0), (1, 0.3), (3, 1.0), (2, 2.0)])
def test_the_hamming_loss_never_exceeds_the_product_of_the_normalisers(
    loader: Any, depth: int, rate: float
) -> None:
    X, y = loader(return_X_y=True)
    mh = AdaBoostMHClassifier(40, learning_rate=rate, max_depth=depth).fit(X, y)
    bound = np.cumprod(mh.normalizers_)
    assert np.all(mh.train_hamming_loss_ <= bound)
    assert np.all(mh.normalizers_ < 1)  # every round lowers the exponential loss
    scores = mh.class_scores(X)
    signs = np.where(y[:, np.newaxis] == mh.classes_[np.newaxis, :], 1.0, -1.0)
    assert mh.train_hamming_loss_[-1] == pytest.approx(np.mean(signs * scores <= 0))
    # The final pair weights are exp(-Y f) / (n k prod Z_t): the updates telescope.
    assert np.exp(-signs * scores).mean() == pytest.approx(bound[-1], rel=1e-9)


def test_a_stump_is_the_cut_with_the_least_z_over_every_feature() -> None:
    X, y = load_wine(return_X_y=True)
    mh = AdaBoostMHClassifier(1).fit(X, y)
    n, k = len(y), 3
    signs = np.where(y[:, np.newaxis] == np.arange(k)[np.newaxis, :], 1.0, -1.0)
    best = (math.inf, -1, math.nan)
    for j in range(X.shape[1]):
        values = np.unique(X[:, j])
        for a, b in itertools.pairwise(values):
            z = 0.0
            for side in (X[:, j] <= a, X[:, j] > a):
                w_pos = ((signs[side] > 0).sum(axis=0)) / (n * k)
                w_neg = ((signs[side] < 0).sum(axis=0)) / (n * k)
                z += 2 * float(np.sqrt(w_pos * w_neg).sum())
            if z < best[0] - 1e-12:
                best = (z, j, (a + b) / 2)
    root = mh.roots_[0]
    assert (mh.tree_feature_[root], mh.tree_threshold_[root]) == (best[1], best[2])


def test_deeper_members_grow_while_z_falls_and_learn_what_stumps_cannot() -> None:
    """XOR of two features: no single cut lowers Z (each half holds both classes
    equally), so stumps score 0 everywhere, every pair sits on the boundary (Hamming loss
    1, Z_t = 1); a depth-2 member splits anyway and separates the four corners."""
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]] * 5, dtype=float)
    y = np.array(["p", "q", "q", "p"] * 5)
    stumps = AdaBoostMHClassifier(5).fit(X, y)
    assert np.all(stumps.tree_value_ == 0) and np.all(stumps.train_hamming_loss_ == 1)
    np.testing.assert_allclose(stumps.normalizers_, 1.0)
    deep = AdaBoostMHClassifier(1, max_depth=2).fit(X, y)
    assert len(deep.tree_feature_) == 7 and deep.train_hamming_loss_[-1] == 0
    assert (deep.predict(X) == y).all()
    assert deep.feature_importances_.sum() == pytest.approx(1.0)


def test_staged_answers_end_at_the_model_s_and_it_clones() -> None:
    X, y = load_iris(return_X_y=True)
    mh = AdaBoostMHClassifier(15, learning_rate=0.5, max_depth=2).fit(X, y)
    staged = list(mh.staged_predict_proba(X))
    assert len(staged) == 15
    np.testing.assert_array_equal(staged[-1], mh.predict_proba(X))
    np.testing.assert_array_equal(list(mh.staged_predict(X))[-1], mh.predict(X))
    decisions = list(mh.staged_decision_function(X))
    np.testing.assert_array_equal(decisions[-1], mh.decision_function(X))
    assert clone(mh).get_params() == {"n_estimators": 15, "learning_rate": 0.5, "max_depth": 2}
    binary = AdaBoostMHClassifier(10).fit(X[:100], y[:100])
    scores = binary.class_scores(X[:100])
    np.testing.assert_allclose(scores[:, 0], -scores[:, 1], rtol=1e-9)  # opposite scores
    assert binary.decision_function(X[:100]).shape == (100,)
    np.testing.assert_allclose(binary.predict_proba(X[:100]).sum(axis=1), 1.0)


# --- through training ---------------------------------------------------------------------


def test_training_reports_curves_hardest_rows_importances_and_no_members() -> None:
    model: FittedModel = fit(
        training_data("wine"), {"kind": "adaboost_mh", "params": {"n_estimators": 30}}, HOLDOUT
    )
    m = model.metrics
    names = [c.name for c in m.curves]
    assert names == ["holdout_accuracy", "train_hamming_loss", "hamming_loss_bound"]
    loss, bound = m.curves[1], m.curves[2]
    assert loss.x == bound.x == list(range(1, 31))
    assert all(a <= b for a, b in zip(loss.y, bound.y, strict=True))
    assert m.hardest_rows is not None and len(m.hardest_rows["rows"]) == 20
    assert m.estimators == [] and m.diversity is None
    assert model.feature_importances is not None
    assert sum(model.feature_importances.values()) == pytest.approx(1.0)
    assert model.training["n_estimators"] == 30


def test_training_reports_progress_per_round_and_a_cancel_stops_it() -> None:
    seen: list[tuple[int, int, str]] = []
    raw = {"kind": "adaboost_mh", "params": {"n_estimators": 6}}
    fit(training_data("wine"), raw, on_progress=lambda *a: seen.append(a))
    assert [(d, t) for d, t, s in seen if s == "fitting"] == [(i, 6) for i in range(7)]
    token = CancelAfter(4)
    with pytest.raises(TrainingCancelledError):
        raw = {"kind": "adaboost_mh", "params": {"n_estimators": 5000}}
        fit(training_data("wine"), raw, on_progress=token.tick, cancel=token)


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "bagging", "params": {"n_estimators": 3}, "estimator": {"kind": "adaboost_mh"}},
        {"kind": "adaboost", "params": {"n_estimators": 3}, "estimator": {"kind": "adaboost_mh"}},
        {
            "kind": "voting",
            "params": {"voting": "soft"},
            "estimators": [
                {"name": "mh", "kind": "adaboost_mh", "params": {"max_depth": 2}},
                {"name": "tree", "kind": "decision_tree"},
            ],
        },
    ],
    ids=["bagging", "adaboost", "voting"],
)
def test_a_member_anywhere_and_the_lineage_names_the_service(raw: dict[str, Any]) -> None:
    model = fit(training_data("wine"), raw, HOLDOUT)
    assert model.metrics.holdout is not None and model.metrics.holdout["accuracy"] > 0.8
    assert "ensemble-service" in library_versions(model.pipeline)


def test_lineage_names_the_service_only_where_its_class_is_in_the_artifact() -> None:
    raw = {"kind": "random_forest", "params": {"n_estimators": 3}}
    forest = fit(training_data("wine"), raw)
    assert "ensemble-service" not in library_versions(forest.pipeline)
    assert {"scikit-learn", "numpy", "python"} <= library_versions(forest.pipeline).keys()


def test_a_regression_task_is_refused_at_the_kind() -> None:
    with pytest.raises(SpecError) as refused:
        resolve_ensemble(parse_estimator_spec({"kind": "adaboost_mh"}), "regression")
    (problem,) = refused.value.problems
    assert problem.loc == ("ensemble", "kind") and "does not do regression" in problem.msg


def test_the_artifact_loads_where_the_service_is_installed(tmp_path: Path) -> None:
    data = training_data("wine")
    model = fit(data, {"kind": "adaboost_mh", "params": {"n_estimators": 5}})
    path = tmp_path / "model.joblib"
    joblib.dump(model.pipeline, path)
    data.X.iloc[:20].to_csv(tmp_path / "rows.csv", index=False)
    script = (
        "import joblib, pandas as pd\n"
        f"model = joblib.load({str(path)!r})\n"
        f"print(list(model.predict(pd.read_csv({str(tmp_path / 'rows.csv')!r}))))\n"
        "print(type(model[-1]).__module__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    predicted, module = done.stdout.strip().splitlines()
    assert predicted == str(list(model.pipeline.predict(data.X.iloc[:20])))
    assert module == "ensembles.kinds.adaboost_mh"


def test_row_weights_start_the_pair_weights_and_weight_the_hamming_loss() -> None:
    X, y = load_wine(return_X_y=True)
    plain = AdaBoostMHClassifier(8).fit(X, y)
    doubled = AdaBoostMHClassifier(8).fit(X, y, sample_weight=np.full(len(y), 2.0))
    np.testing.assert_array_equal(doubled.tree_value_, plain.tree_value_)  # D_1 the same
    w = np.random.default_rng(0).integers(0, 4, len(y)).astype(float)
    weighted = AdaBoostMHClassifier(8).fit(X, y, sample_weight=w)
    signs = np.where(y[:, np.newaxis] == weighted.classes_[np.newaxis, :], 1.0, -1.0)
    wrong = (signs * weighted.class_scores(X) <= 0).mean(axis=1)  # per row, over classes
    assert weighted.train_hamming_loss_[-1] == pytest.approx(np.sum(w * wrong) / w.sum())
    assert np.all(weighted.train_hamming_loss_ <= np.cumprod(weighted.normalizers_))
    with pytest.raises(ValueError, match="non-negative"):
        AdaBoostMHClassifier(2).fit(X, y, sample_weight=-w)


def _cover_expectation(tree: dict[str, Any], x: Any, known: set[int], node: int = 0) -> Any:
    """E[tree(x) | the columns in ``known``], unknown columns following the training rows'
    cover: the conditional expectation TreeSHAP's path-dependent form takes Shapley values of."""
    left, right = tree["children_left"][node], tree["children_right"][node]
    if left < 0:
        return tree["values"][node]
    feature = tree["features"][node]
    if feature in known:
        child = left if x[feature] <= tree["thresholds"][node] else right
        return _cover_expectation(tree, x, known, child)
    cover = tree["node_sample_weight"]
    return (
        cover[left] * _cover_expectation(tree, x, known, left)
        + cover[right] * _cover_expectation(tree, x, known, right)
    ) / (cover[left] + cover[right])


def _brute_force_shapley(tables: dict[str, Any], x: Any, m: int) -> Any:
    """Shapley values of the trees' summed conditional expectation, over every subset."""

    def value(known: set[int]) -> Any:
        return sum(_cover_expectation(tree, x, known) for tree in tables["trees"])

    phi = []
    for i in range(m):
        others = [j for j in range(m) if j != i]
        total = 0.0
        for size in range(m):
            weight = math.factorial(size) * math.factorial(m - size - 1) / math.factorial(m)
            for subset in itertools.combinations(others, size):
                total = total + weight * (value({*subset, i}) - value(set(subset)))
        phi.append(total)
    return np.stack(phi, axis=-1)  # (outputs, columns)


@pytest.mark.parametrize(("classes", "depth"), [(3, 1), (3, 2), (2, 2)])
def test_the_margin_is_explained_exactly_by_treeshap_over_its_members(
    classes: int, depth: int
) -> None:
    """The explanation the kind declares: exact TreeSHAP of the margin f (two classes:
    f1 - f0), equal to Shapley values worked out over every subset of columns from the
    members' covers, adding up to the decision function row by row."""
    X, y = load_iris(return_X_y=True)
    keep = y < classes
    X, y = X[keep], y[keep]
    model = AdaBoostMHClassifier(n_estimators=6, max_depth=depth).fit(X, y)
    found = explanation(model, X[::7], "margin")
    assert found is not None and found.method == "tree_shap"
    margin = model.decision_function(X[::7]).reshape(len(X[::7]), -1)
    np.testing.assert_allclose(found.outputs(), margin, atol=1e-9)
    tables = shap_tables(model)
    for tree in tables["trees"]:  # covers: the training rows reaching each node
        cover, left, right = (
            tree["node_sample_weight"],
            tree["children_left"],
            tree["children_right"],
        )
        assert cover[0] == len(X)
        inner = left >= 0
        np.testing.assert_array_equal(cover[inner], cover[left[inner]] + cover[right[inner]])
    for row, x in enumerate(X[::7][:6]):
        np.testing.assert_allclose(found.phi[row], _brute_force_shapley(tables, x, 4), atol=1e-9)
    assert explanation(model, X[:3], "proba") is None  # sigma(2f) normalised: sampled
