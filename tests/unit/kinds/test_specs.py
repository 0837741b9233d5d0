"""Specs of pasting_votes and ensemble_selection refused before training, each problem
at its field with a message that says what to do; and the artifact both kinds leave
loads with joblib and scikit-learn alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import joblib
import pytest

from ensembles.catalog import KINDS, catalog_document
from ensembles.errors import SpecError
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import check_against_rows, fitted_members, resolve_ensemble
from tests.kinds import SPECS
from tests.unit.datasets import training_data

LIBRARY = [
    {"name": "lr", "kind": "logistic_regression"},
    {"name": "tree", "kind": "decision_tree"},
]


def refusals(raw: dict[str, Any], task: str = "classification") -> dict[tuple[Any, ...], str]:
    with pytest.raises(SpecError) as caught:
        resolve_ensemble(parse_estimator_spec(raw), task)  # type: ignore[arg-type]
    return {p.loc: p.msg for p in caught.value.problems}


def selection(params: dict[str, Any], estimators: list[dict[str, Any]] = LIBRARY) -> Any:
    return {"kind": "ensemble_selection", "params": params, "estimators": estimators}


@pytest.mark.parametrize(
    ("raw", "task", "loc", "says"),
    [
        (
            {"kind": "pasting_votes", "params": {"patience": 0}},
            "classification",
            ("ensemble", "params", "patience"),
            "must be an integer >= 1",
        ),
        (
            {"kind": "pasting_votes", "params": {"max_estimators": 0}},
            "classification",
            ("ensemble", "params", "max_estimators"),
            "must be an integer >= 1",
        ),
        (
            {"kind": "pasting_votes", "params": {"bite_size": 0}},
            "classification",
            ("ensemble", "params", "bite_size"),
            "must be an integer >= 1",
        ),
        (
            {"kind": "pasting_votes", "params": {"sampling": "importance"}},
            "regression",
            ("ensemble", "params", "sampling"),
            "'importance' is for classification only",
        ),
        (
            {"kind": "pasting_votes", "params": {"sampling": "boosted"}},
            "classification",
            ("ensemble", "params", "sampling"),
            "one of 'random', 'importance'",
        ),
        (
            {"kind": "pasting_votes", "estimator": {"kind": "gaussian_nb"}},
            "regression",
            ("ensemble", "estimator", "kind"),
            "does not do regression",
        ),
        (
            selection({"metric": "rmse"}),
            "classification",
            ("ensemble", "params", "metric"),
            "'rmse' is for regression only",
        ),
        (
            selection({"metric": "log_loss"}, [{"name": "lin", "kind": "ridge"}]),
            "regression",
            ("ensemble", "params", "metric"),
            "'log_loss' is for classification only",
        ),
        (
            selection({"metric": "brier"}),
            "classification",
            ("ensemble", "params", "metric"),
            "must be one of 'accuracy'",
        ),
        (
            selection({}, []),
            "classification",
            ("ensemble", "estimators"),
            "needs at least one estimator",
        ),
        (
            selection({}, [*LIBRARY, {"name": "svm", "kind": "svm"}]),
            "classification",
            ("ensemble", "estimators", 2, "kind"),
            "'svm' gives no probabilities, which ensemble selection needs",
        ),
        (
            selection({"init_size": 3}),
            "classification",
            ("ensemble", "params", "init_size"),
            "init_size=3, but the library has 2 estimators: set init_size to at most 2",
        ),
        (
            selection({"init_size": 2, "bags": 3, "bag_fraction": 0.5}),
            "classification",
            ("ensemble", "params", "init_size"),
            "each bag draws 1 of the 2 estimators",
        ),
        (
            selection({"cv": 1}),
            "classification",
            ("ensemble", "params", "cv"),
            "must be an integer >= 2 and <= 20",
        ),
        (
            {"kind": "voting", "estimators": [{"name": "pv", "kind": "pasting_votes"}]},
            "classification",
            ("ensemble", "estimators", 0, "kind"),
            "'pasting_votes' can only be the top-level ensemble",
        ),
        (
            selection({}, [{"name": "inner", "kind": "ensemble_selection", "estimators": LIBRARY}]),
            "classification",
            ("ensemble", "estimators", 0, "kind"),
            "'ensemble_selection' can only be the top-level ensemble",
        ),
    ],
    ids=lambda v: None if isinstance(v, dict | tuple | str) else str(v),
)
def test_bad_specs_are_refused_at_their_field(
    raw: dict[str, Any], task: str, loc: tuple[Any, ...], says: str
) -> None:
    problems = refusals(raw, task)
    assert loc in problems, problems
    assert says in problems[loc]


def test_a_library_may_hold_ensembles() -> None:
    raw = selection(
        {"metric": "roc_auc"},
        [
            *LIBRARY,
            {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 5}},
            {"name": "vote", "kind": "voting", "params": {"voting": "soft"}, "estimators": LIBRARY},
        ],
    )
    spec = resolve_ensemble(parse_estimator_spec(raw), "classification")
    # Every member once per fold and once on every row: (1 + 1 + 5 + 2) * (5 + 1).
    assert fitted_members(spec) == 9 * 6


def test_resource_bounds_count_every_member_pasting_votes_may_fit() -> None:
    raw = {
        "kind": "pasting_votes",
        "params": {"max_estimators": 3000},
        "estimator": {"kind": "bagging", "params": {"n_estimators": 10}},
    }
    problems = refusals(raw)
    assert "30000 estimators" in problems[("ensemble",)]


EVAL = EvaluationSpec(holdout_fraction=0.2, cv_folds=0)


def rows_problems(raw: dict[str, Any], evaluation: EvaluationSpec = EVAL) -> dict[Any, str]:
    data = training_data("wine")  # 178 rows: 142 after holding out 36
    spec = resolve_ensemble(parse_estimator_spec(raw), "classification")
    return {p.loc: p.msg for p in check_against_rows(spec, evaluation, data.y, data.task, 0)}


def test_a_bite_must_leave_rows_out_of_bag() -> None:
    where = ("ensemble", "params", "bite_size")
    for bite in (142, 500):
        problems = rows_problems({"kind": "pasting_votes", "params": {"bite_size": bite}})
        assert "set bite_size to at most 141" in problems[where]
        assert "142 training rows left after holding out 36 of 178" in problems[where]
    assert rows_problems({"kind": "pasting_votes", "params": {"bite_size": 141}}) == {}
    folds = EvaluationSpec(holdout_fraction=0.2, cv_folds=4)
    problems = rows_problems({"kind": "pasting_votes", "params": {"bite_size": 120}}, folds)
    assert "cross-validation (cv_folds=4)" in problems[where]


def test_the_folds_of_a_selection_are_checked_against_the_classes() -> None:
    problems = rows_problems(selection({"cv": 20}), EvaluationSpec(holdout_fraction=0.8))
    assert (
        "every class has fewer than 20 rows where this ensemble_selection is"
        in problems[("ensemble", "params", "cv")]
    )


def test_the_catalog_lists_both_kinds_with_their_artifact_classes() -> None:
    entries = {e["kind"]: e for e in catalog_document()["ensemble_kinds"]}
    for name in ("pasting_votes", "ensemble_selection"):
        entry = entries[name]
        assert entry["top_level_only"] is True
        assert entry["sklearn_classes"] == {
            "classification": "VotingClassifier",
            "regression": "VotingRegressor",
        }
    params = entries["ensemble_selection"]["params"]
    assert params["regression"]["properties"]["metric"]["enum"] == ["r2", "rmse", "mae"]
    assert KINDS["pasting_votes"].param("sampling") is not None


@pytest.mark.parametrize("kind", ["pasting_votes", "ensemble_selection"])
def test_the_artifact_loads_with_joblib_and_scikit_learn_alone(kind: str, tmp_path: Path) -> None:
    data = training_data("wine")
    spec = resolve_ensemble(parse_estimator_spec(SPECS[(kind, "classification")]), data.task)
    model = train(data, spec, EVAL, 0)
    path = tmp_path / "model.joblib"
    joblib.dump(model.pipeline, path)
    data.X.iloc[:20].to_csv(tmp_path / "rows.csv", index=False)
    script = (
        "import sys, joblib, pandas as pd\n"
        f"model = joblib.load({str(path)!r})\n"
        f"print(list(model.predict(pd.read_csv({str(tmp_path / 'rows.csv')!r}))))\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('ensembles', 'app')]\n"
        "print(type(model[-1]).__module__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    predicted, module = done.stdout.strip().splitlines()
    assert predicted == str(list(model.pipeline.predict(data.X.iloc[:20])))
    assert module.startswith("sklearn.ensemble")
