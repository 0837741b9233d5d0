"""Explanations in the library: additive for every kind of tests/kinds.py, equal to the
shap library's own explainers where it has one, the weighted-sum rule through nesting, a
column no tree can split on credited exactly 0, the permutation estimate seeded by the row.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import numpy as np
import pandas as pd
import pytest
import shap
from sklearn import datasets
from sklearn.tree import DecisionTreeRegressor

from ensembles.data import select_training_data, table_from_frame
from ensembles.explain.attribution import ExplanationTooSlowError
from ensembles.explain.explanation import Explained, explain, reference_row
from ensembles.explain.summary import PERMUTATION_ROWS
from ensembles.explain.trees import tables_attribution, tree_table
from ensembles.plots import contributions as contributions_plot
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.tasks import Task
from ensembles.training import FittedModel, train
from ensembles.validation import resolve_ensemble
from tests.kinds import cases
from tests.unit.datasets import frame
from tests.unit.test_kinds import DATASET, fitted

TOL = 1e-6
HOLDOUT = EvaluationSpec(holdout_fraction=0.25, cv_folds=0)


def _explained(model: FittedModel, X: pd.DataFrame, **kwargs: Any) -> tuple[Explained, Any]:
    Xt = np.asarray(model.pipeline[0].transform(X), dtype=np.float64)
    task = model.signature.task
    return explain(model.pipeline, task, Xt, model.signature.classes, **kwargs), Xt


def _rows(task: Task, n: int = 25) -> pd.DataFrame:
    return frame(DATASET[task]).drop(columns="target").iloc[:n]


@pytest.mark.parametrize(("kind", "task"), cases())
def test_every_kind_adds_up_to_its_output_for_every_row_and_class(kind: str, task: Task) -> None:
    model = fitted(kind, task)
    explained, _ = _explained(model, _rows(task))
    doc = explained.document()
    # XGBoost adds in float32 (7 significant digits): within 1e-6 of the output's size.
    size = max(1.0, float(np.abs(explained.outputs).max())) if kind == "xgboost" else 1.0
    tol = TOL * size
    assert doc["additivity_error"] <= tol
    assert doc["features"] == list(_rows(task).columns)
    assert doc["exact"] == (doc["method"] != "permutation")
    n_outputs = 1 if task == "regression" else explained.contributions.shape[1]
    assert explained.contributions.shape == (25, n_outputs, len(doc["features"]))
    for row, output in zip(doc["contributions"], doc["outputs"], strict=True):
        if task == "regression":
            assert abs(doc["base_values"] + sum(row.values()) - output) <= tol
            continue
        for label, contributions in row.items():
            total = doc["base_values"][label] + sum(contributions.values())
            assert abs(total - output[label]) <= tol
    if doc["space"] == "probability":  # the served probabilities themselves
        proba = model.pipeline.predict_proba(_rows(task))
        np.testing.assert_allclose(explained.outputs, proba, atol=1e-12)


def _fit(spec: dict[str, Any], task: Task, data: pd.DataFrame | None = None) -> FittedModel:
    table = frame(DATASET[task]) if data is None else data
    training = select_training_data(table_from_frame(table), "target")
    resolved = resolve_ensemble(parse_estimator_spec(spec), task)
    return train(training, resolved, HOLDOUT, 3)


def _shap(estimator: Any, Xt: Any) -> tuple[np.ndarray, np.ndarray]:
    explainer = shap.TreeExplainer(estimator)
    values = np.asarray(explainer.shap_values(Xt, check_additivity=False))
    phi = values[:, None, :] if values.ndim == 2 else values.transpose(0, 2, 1)
    return np.atleast_1d(explainer.expected_value), phi


EXACT_FAMILIES = [
    ({"kind": "random_forest", "params": {"n_estimators": 20}}, "classification"),
    ({"kind": "random_forest", "params": {"n_estimators": 20}}, "regression"),
    ({"kind": "extra_trees", "params": {"n_estimators": 20}}, "classification"),
    ({"kind": "extra_trees", "params": {"n_estimators": 20}}, "regression"),
    ({"kind": "gradient_boosting", "params": {"n_estimators": 15}}, "regression"),
    ({"kind": "hist_gradient_boosting", "params": {"max_iter": 15}}, "classification"),
    ({"kind": "hist_gradient_boosting", "params": {"max_iter": 15}}, "regression"),
]


@pytest.mark.parametrize(("spec", "task"), EXACT_FAMILIES, ids=str)
def test_tree_families_equal_shaps_own_tree_explainer(spec: dict[str, Any], task: Task) -> None:
    model = _fit(spec, task)
    explained, Xt = _explained(model, _rows(task, 40))
    base, phi = _shap(model.pipeline[-1], Xt)
    assert explained.method == "tree_shap" and explained.exact
    # The same compiled algorithm on the same tables: bit for bit.
    np.testing.assert_array_equal(explained.base, base)
    np.testing.assert_array_equal(explained.contributions, phi)


def test_a_decision_tree_equals_shap() -> None:
    model = fitted("decision_tree", "classification")  # the member of a bagging
    bagging = model.pipeline[-1]
    Xt = np.asarray(model.pipeline[0].transform(_rows("classification")), dtype=np.float64)
    member, columns = bagging.estimators_[0], bagging.estimators_features_[0]
    explained, _ = _explained(model, _rows("classification"))
    # The bagging's explanation is the mean of its members' shap values, each on its columns.
    phi = np.zeros_like(explained.contributions)
    base = np.zeros(explained.base.shape)
    for tree, cols in zip(bagging.estimators_, bagging.estimators_features_, strict=True):
        b, p = _shap(tree, Xt[:, cols])
        phi[:, :, cols] += p / len(bagging.estimators_)
        base += b / len(bagging.estimators_)
    np.testing.assert_allclose(explained.contributions, phi, atol=TOL)
    np.testing.assert_allclose(explained.base, base, atol=TOL)
    assert member is not None and len(columns) > 0


def test_binary_gradient_boosting_margin_equals_shap() -> None:
    data = frame("breast_cancer")
    model = _fit(
        {"kind": "gradient_boosting", "params": {"n_estimators": 20}}, "classification", data
    )
    rows = data.drop(columns="target").iloc[:30]
    explained, Xt = _explained(model, rows)
    base, phi = _shap(model.pipeline[-1], Xt)
    assert explained.space == "margin" and explained.outputs_named == ("1",)
    np.testing.assert_allclose(explained.base, base, atol=TOL)
    np.testing.assert_allclose(explained.contributions, phi, atol=TOL)
    np.testing.assert_allclose(
        explained.outputs[:, 0], model.pipeline.decision_function(rows), atol=1e-12
    )


def test_multiclass_gradient_boosting_is_each_classs_trees_shap() -> None:
    """shap reads only binary gradient boosting: class k's margin is its own trees'
    regression-tree sum, which shap reads tree by tree."""
    model = _fit({"kind": "gradient_boosting", "params": {"n_estimators": 10}}, "classification")
    explained, Xt = _explained(model, _rows("classification"))
    gb = model.pipeline[-1]
    for k in range(3):
        phi = sum(gb.learning_rate * _shap(stage, Xt)[1][:, 0, :] for stage in gb.estimators_[:, k])
        np.testing.assert_allclose(explained.contributions[:, k, :], phi, atol=TOL)
    assert explained.additivity_error <= TOL


def test_linear_members_equal_shaps_linear_explainer_from_the_reference_row() -> None:
    model = fitted("ridge", "regression")
    rows = _rows("regression")
    reference = {c: float(rows[c].median()) for c in rows.columns}
    encoded = reference_row(model.pipeline, reference)
    explained, Xt = _explained(model, rows, reference=encoded)
    assert explained.method == "linear"
    bagging = model.pipeline[-1]
    phi = np.zeros_like(explained.contributions)
    for member, cols in zip(bagging.estimators_, bagging.estimators_features_, strict=True):
        assert encoded is not None
        linear = shap.LinearExplainer(member, shap.maskers.Independent(encoded[None, cols]))
        phi[:, 0, cols] += linear.shap_values(Xt[:, cols]) / len(bagging.estimators_)
    np.testing.assert_allclose(explained.contributions, phi, atol=TOL)


def test_soft_vote_over_bagging_is_the_weighted_sum_of_its_members_shap() -> None:
    spec = {
        "kind": "voting",
        "params": {"voting": "soft", "weights": [2.0, 1.0]},
        "estimators": [
            {"name": "bag", "kind": "bagging", "params": {"n_estimators": 4, "max_features": 0.7}},
            {"name": "forest", "kind": "random_forest", "params": {"n_estimators": 8}},
        ],
    }
    model = _fit(spec, "classification")
    explained, Xt = _explained(model, _rows("classification"))
    voting = model.pipeline[-1]
    bag, forest = voting.estimators_
    expected = 2.0 / 3.0 * _bag_shap(bag, Xt) + 1.0 / 3.0 * _shap(forest, Xt)[1]
    assert explained.method == "tree_shap" and explained.space == "probability"
    np.testing.assert_allclose(explained.contributions, expected, atol=TOL)
    assert explained.additivity_error <= TOL


def _bag_shap(bagging: Any, Xt: np.ndarray) -> np.ndarray:
    phi = np.zeros((len(Xt), len(bagging.classes_), Xt.shape[1]))
    for tree, cols in zip(bagging.estimators_, bagging.estimators_features_, strict=True):
        phi[:, :, cols] += _shap(tree, Xt[:, cols])[1] / len(bagging.estimators_)
    return phi


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "random_forest", "params": {"n_estimators": 10}},
        {"kind": "gradient_boosting", "params": {"n_estimators": 10}},
        {"kind": "bagging", "params": {"n_estimators": 3}, "estimator": {"kind": "knn"}},
    ],
    ids=["forest", "boosting", "knn-permutation"],
)
def test_a_column_no_model_can_use_gets_exactly_zero(spec: dict[str, Any]) -> None:
    data = frame("wine").assign(flat=1.5)
    model = _fit(spec, "classification", data)
    rows = data.drop(columns="target").iloc[:15]
    encoded = reference_row(model.pipeline, rows.median().to_dict())
    explained, _ = _explained(model, rows, reference=encoded)
    flat = explained.features.index("flat")
    assert np.all(explained.contributions[:, :, flat] == 0.0)
    assert explained.additivity_error <= TOL


def test_the_permutation_estimate_is_seeded_by_the_row_not_the_batch() -> None:
    model = fitted("knn", "regression")
    rows = _rows("regression", 12)
    alone, _ = _explained(model, rows.iloc[[5]])
    batch, _ = _explained(model, rows)
    again, _ = _explained(model, rows)
    assert batch.method == "permutation" and not batch.exact
    np.testing.assert_array_equal(batch.contributions, again.contributions)
    np.testing.assert_allclose(alone.contributions[0], batch.contributions[5], atol=1e-12)
    other_seed, _ = _explained(model, rows, seed=1)
    assert not np.array_equal(other_seed.contributions, batch.contributions)


def test_top_keeps_the_largest_and_sums_the_rest_as_other() -> None:
    model = fitted("random_forest", "classification")
    explained, _ = _explained(model, _rows("classification", 3))
    full = explained.document()
    top = explained.document(top=2)
    for row_full, row_top in zip(full["contributions"], top["contributions"], strict=True):
        for label, values in row_top.items():
            assert len(values) == 3 and "(other)" in values
            kept = sorted(row_full[label].values(), key=abs, reverse=True)[:2]
            assert sorted(v for k, v in values.items() if k != "(other)") == sorted(kept)
            assert sum(values.values()) == pytest.approx(sum(row_full[label].values()), abs=1e-12)


def test_adaboost_margin_is_its_members_weighted_label_codes() -> None:
    model = fitted("adaboost", "classification")
    explained, _ = _explained(model, _rows("classification"))
    assert explained.space == "margin" and explained.method == "tree_shap"
    np.testing.assert_allclose(
        explained.outputs, model.pipeline.decision_function(_rows("classification")), atol=1e-12
    )
    assert explained.additivity_error <= TOL


def test_an_explanation_past_its_deadline_stops_with_its_own_error() -> None:
    model = fitted("knn", "regression")
    with pytest.raises(ExplanationTooSlowError, match="ENSEMBLE_EXPLAIN_SECONDS"):
        _explained(model, _rows("regression", 5), deadline=time.monotonic() - 1.0)


def test_without_shap_an_explanation_names_the_extra_to_install() -> None:
    """In a fresh interpreter where ``import shap`` fails, as where the extra is absent."""
    code = (
        "import sys; sys.modules['shap'] = None\n"
        "from ensembles.explain.treeshap import extension\n"
        "from ensembles.explain.attribution import ExplainUnavailableError\n"
        "try:\n    extension()\nexcept ExplainUnavailableError as e:\n"
        "    print(e.code, e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.startswith("explain_unavailable") and "ensemble-service[explain]" in out


FRESH_EXPLANATIONS = """
import sys
import numpy as np
from sklearn import datasets
from ensembles.data import select_training_data, table_from_frame
from ensembles.explain.explanation import explain
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble

table = datasets.load_wine(as_frame=True).frame
training = select_training_data(table_from_frame(table), "target")
holdout = EvaluationSpec(holdout_fraction=0.25, cv_folds=0)
rows = table.drop(columns="target").iloc[:5]
for kind, size in [("random_forest", "n_estimators"), ("gradient_boosting", "n_estimators"),
                   ("hist_gradient_boosting", "max_iter"), ("adaboost_mh", "n_estimators")]:
    spec = parse_estimator_spec({"kind": kind, "params": {size: 5}})
    model = train(training, resolve_ensemble(spec, "classification"), holdout, 3)
    Xt = np.asarray(model.pipeline[0].transform(rows), dtype=np.float64)
    explained = explain(model.pipeline, "classification", Xt, model.signature.classes)
    print(kind, explained.method, model.metrics.explanations["method"])
print(*sorted({"shap", "numba", "llvmlite"} & set(sys.modules)))  # shap._cext alone is
"""


def test_tree_explanations_never_import_shap_nor_numba() -> None:
    """shap's compiled TreeSHAP is loaded on its own: ``import shap`` would load numba and
    LLVM (168 MB of the image, which installs shap without them) for nothing."""
    out = subprocess.run(
        [sys.executable, "-c", FRESH_EXPLANATIONS],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.splitlines()
    assert out[:-1] == [
        f"{kind} tree_shap tree_shap"
        for kind in ("random_forest", "gradient_boosting", "hist_gradient_boosting", "adaboost_mh")
    ]
    assert out[-1] == ""  # neither shap nor numba nor llvmlite was imported


def test_training_records_mean_abs_contributions_and_the_reference_row() -> None:
    model = fitted("random_forest", "classification")
    block = model.metrics.explanations
    assert block is not None
    assert (block["evaluated_on"], block["space"], block["method"]) == (
        "holdout",
        "probability",
        "tree_shap",
    )
    assert block["rows"] == model.training["n_holdout"]
    features = list(_rows("classification").columns)
    assert set(block["mean_abs"]) == {str(c) for c in model.signature.classes or ()}
    for per_column in block["mean_abs"]:
        assert list(block["mean_abs"][per_column]) == features
    assert block["reference"]["alcohol"] == pytest.approx(
        float(np.median(model.train_rows["alcohol"]))
    )
    assert model.training["explanations_s"] >= 0
    drawn = contributions_plot.read({"metrics": {"explanations": block}})
    assert drawn.outputs == ["0", "1", "2"] and len(drawn.features) == len(features)
    contributions_plot.draw(drawn)


def test_a_permutation_kind_summarises_fewer_rows() -> None:
    model = fitted("knn", "regression")
    block = model.metrics.explanations
    assert block is not None and block["method"] == "permutation" and not block["exact"]
    assert block["rows"] == min(PERMUTATION_ROWS, model.training["n_holdout"])
    assert set(block["mean_abs"]) == {"value"}


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "random_forest", "params": {"n_estimators": 8}},
        {"kind": "bagging", "params": {"n_estimators": 3}, "estimator": {"kind": "knn"}},
    ],
    ids=["tree_shap", "permutation"],
)
def test_encoded_columns_are_summed_back_onto_their_input_column(spec: dict[str, Any]) -> None:
    table = frame("wine")
    colours = np.array(["red", "white", "rose"])[table["target"].to_numpy() % 3]
    data = table.assign(colour=colours, rich=table["alcohol"] > 13)
    model = _fit(spec, "classification", data)
    rows = data.drop(columns="target").iloc[::20]
    block = model.metrics.explanations
    assert block is not None and block["reference"]["colour"] in {"red", "white", "rose"}
    encoded = reference_row(model.pipeline, block["reference"])
    explained, Xt = _explained(model, rows, reference=encoded)
    assert Xt.shape[1] > len(explained.features)  # one-hot columns
    assert list(explained.features) == list(rows.columns)  # the table's order, each once
    assert explained.additivity_error <= TOL


def test_tree_tables_with_leaf_values_of_its_own_equal_shap_on_those_trees() -> None:
    """What a kind with scores of its own in its trees' leaves declares (AdaBoost.MH):
    alpha-weighted per-class leaf scores of several trees, one table each."""
    X, y = datasets.load_wine(return_X_y=True)
    trees = [DecisionTreeRegressor(max_depth=2, random_state=s).fit(X, y == s) for s in range(3)]
    alphas = [0.5, 1.5, 2.0]

    def tables() -> dict[str, Any]:
        tabled = []
        for k, (tree, alpha) in enumerate(zip(trees, alphas, strict=True)):
            leaves = np.zeros((tree.tree_.node_count, 3))
            leaves[:, k] = alpha * tree.tree_.value[:, 0, 0]
            tabled.append(tree_table(tree.tree_, leaves))
        return {"trees": tabled}

    found = tables_attribution(trees[0], "test", X[:20], tables)
    for k, (tree, alpha) in enumerate(zip(trees, alphas, strict=True)):
        np.testing.assert_allclose(
            found.phi[:, k, :], alpha * _shap(tree, X[:20])[1][:, 0, :], atol=TOL
        )
        np.testing.assert_allclose(found.outputs()[:, k], alpha * tree.predict(X[:20]), atol=TOL)


def test_histogram_boosting_splitting_on_categories_is_sampled_not_misread() -> None:
    """shap reads a histogram tree's category-set splits as thresholds: wrong values. Such a
    model is explained by the permutation estimate (still additive); without categorical
    columns it stays exact."""
    table = frame("wine")
    ranks = table["alcohol"].rank().to_numpy().astype(int)
    data = table.assign(colour=np.array(["red", "white", "rose", "pink", "blue"])[ranks % 5])
    model = _fit(
        {"kind": "hist_gradient_boosting", "params": {"max_iter": 20}}, "classification", data
    )
    explained, _ = _explained(model, data.drop(columns="target").iloc[::10])
    assert (explained.method, explained.exact) == ("permutation", False)
    assert explained.additivity_error <= TOL


STACKINGS = {
    "trees-linear-final-passthrough": {
        "kind": "stacking",
        "params": {"cv": 3, "passthrough": True},
        "estimators": [
            {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            {"name": "forest", "kind": "random_forest", "params": {"n_estimators": 5}},
        ],
        "final_estimator": {"kind": "logistic_regression", "params": {"max_iter": 1000}},
    },
    "labels-into-naive-bayes": {
        "kind": "stacking",
        "params": {"cv": 3, "stack_method": "predict"},
        "estimators": [
            {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            {"name": "knn", "kind": "knn"},
        ],
        "final_estimator": {"kind": "gaussian_nb"},
    },
}


@pytest.mark.parametrize("name", list(STACKINGS))
def test_stacking_is_exact_through_a_linear_final_estimator_only(name: str) -> None:
    model = _fit(STACKINGS[name], "classification")
    rows = _rows("classification", 30)
    explained, _ = _explained(model, rows)
    assert explained.additivity_error <= TOL
    if name.startswith("trees-linear"):
        assert (explained.space, explained.method) == ("margin", "tree_shap")
        np.testing.assert_allclose(
            explained.outputs, model.pipeline.decision_function(rows), atol=1e-12
        )
    else:
        assert (explained.space, explained.method) == ("probability", "permutation")
