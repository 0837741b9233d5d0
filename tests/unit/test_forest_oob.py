"""A bootstrapped forest the service trains carries scikit-learn's own OOB attributes,
made from the members' pass instead of the OOB pass at the end of scikit-learn's fit
(:mod:`ensembles.forest_oob`): the stored model pickles byte for byte as the same
forest fitted directly with ``oob_score=True``, and its fit makes no OOB pass."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier

from ensembles.data import TrainingData, select_training_data, table_from_frame
from ensembles.parallel import MemberPool
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import frame, training_data

RS = 3


def _strings_with_gaps() -> TrainingData:
    """Three string classes and missing values (the trees route them)."""
    table = frame("wine").copy()
    table["target"] = np.asarray(["barolo", "chianti", "amarone"], dtype=object)[table["target"]]
    table.loc[::7, "alcohol"] = np.nan
    return select_training_data(table_from_frame(table), "target")


def _binary() -> TrainingData:
    table = frame("breast_cancer")
    return select_training_data(table_from_frame(table.iloc[:300]), "target")


CASES = [
    ("wine", {"kind": "random_forest", "params": {"n_estimators": 30}}),
    ("strings", {"kind": "random_forest", "params": {"n_estimators": 20, "max_samples": 0.5}}),
    ("binary", {"kind": "random_forest", "params": {"n_estimators": 3}}),  # rows never OOB
    ("wine", {"kind": "extra_trees", "params": {"n_estimators": 15, "bootstrap": True}}),
    ("diabetes", {"kind": "random_forest", "params": {"n_estimators": 25}}),
    ("diabetes", {"kind": "extra_trees", "params": {"n_estimators": 2, "bootstrap": True}}),
]


def _data(name: str) -> TrainingData:
    if name == "strings":
        return _strings_with_gaps()
    if name == "binary":
        return _binary()
    return training_data(name)


@pytest.mark.parametrize("holdout", [0.0, 0.2])
@pytest.mark.parametrize(("dataset", "raw"), CASES, ids=lambda c: str(c)[:50])
def test_the_stored_forest_is_the_one_fitted_with_its_own_oob_pass(
    dataset: str, raw: dict[str, Any], holdout: float
) -> None:
    data = _data(dataset)
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    evaluation = EvaluationSpec(holdout_fraction=holdout)
    fitted = train(data, spec, evaluation, RS, pool=MemberPool.local(2))
    forest = fitted.pipeline[-1]
    assert forest.oob_score is True
    assert not any(name.startswith("_ensemble") for name in vars(forest))

    # The same forest fitted directly, with scikit-learn's own OOB pass in its fit.
    Xt = np.asarray(fitted.pipeline[:-1].transform(fitted.train_rows))
    y = _training_labels(data, fitted.train_rows)
    direct = clone(forest).set_params(oob_score=True).fit(Xt, y)
    assert pickle.dumps(forest, protocol=5) == pickle.dumps(direct, protocol=5)
    assert fitted.metrics.oob is not None


def _training_labels(data: TrainingData, rows: pd.DataFrame) -> Any:
    return np.asarray(data.y)[np.asarray(data.X.index.get_indexer(rows.index))]


def test_the_fit_makes_no_oob_pass_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """scikit-learn's OOB pass (one thread, table order) is not run: the members' pass
    after the fit already tallies every tree's out-of-bag rows."""
    calls: list[int] = []
    own = RandomForestClassifier._set_oob_score_and_attributes

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        own(self, *args, **kwargs)

    monkeypatch.setattr(RandomForestClassifier, "_set_oob_score_and_attributes", counted)
    data = training_data("iris")
    raw = {"kind": "random_forest", "params": {"n_estimators": 10}}
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    fitted = train(data, spec, EvaluationSpec(holdout_fraction=0.0), RS)
    assert calls == []
    oob = fitted.metrics.oob
    assert oob is not None
    assert fitted.pipeline[-1].oob_score_ == pytest.approx(oob["accuracy"])
