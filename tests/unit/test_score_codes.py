"""The metric set of a classifier's rows (``metrics.score``) from class codes of one byte,
and with the predicted labels' codes given when the caller knows them: the very figures
of the code before (scikit-learn's metrics on 8-byte codes, both hashed from labels)."""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm

from ensembles import evaluation, metrics


def _score_before(y_true: Any, y_pred: Any, proba: Any, classes: list[Any]) -> dict[str, Any]:
    """metrics.score's classification figures as the code before made them."""
    t, p = metrics.class_codes(y_true, classes), metrics.class_codes(y_pred, classes)
    k = list(range(len(classes)))

    def num(x: float) -> float | None:
        x = float(x)
        return None if math.isnan(x) or math.isinf(x) else x

    with _quiet():
        out: dict[str, Any] = {
            "accuracy": num(np.mean(t == p)),
            "balanced_accuracy": num(skm.balanced_accuracy_score(t, p)),
            "f1_macro": num(skm.f1_score(t, p, average="macro", labels=k, zero_division=0)),
            "f1_weighted": num(skm.f1_score(t, p, average="weighted", labels=k, zero_division=0)),
        }
        if proba is not None:
            out["log_loss"] = num(skm.log_loss(t, proba, labels=k))
            out["roc_auc"] = metrics._roc_auc(t, proba, k)
        out["confusion_matrix"] = skm.confusion_matrix(t, p, labels=k).tolist()
        out["n"] = len(y_true)
    return out


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """scikit-learn's warnings (a class absent from the rows) are not what is tested."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _case(seed: int, n_classes: int, n: int, unseen: bool) -> tuple[Any, ...]:
    r = np.random.default_rng(seed)
    classes = [f"c{j:02d}" for j in range(n_classes)]
    pool = np.array(classes + (["zz"] if unseen else []), dtype=object)
    y_true = pool[r.integers(0, len(pool) - (1 if seed % 3 == 0 else 0), n)]
    proba = r.dirichlet(np.ones(n_classes), n)
    index = np.argmax(proba, axis=1)
    if seed % 2:  # a noisier model: some predictions at random
        swap = r.random(n) < 0.3
        index[swap] = r.integers(0, n_classes, swap.sum())
    return y_true, np.array(classes, dtype=object).take(index), proba, classes, index


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("n_classes", [2, 3, 7, 127, 130])
def test_the_figures_are_those_before(seed: int, n_classes: int) -> None:
    """Binary and multiclass, with absent classes, labels no class has (-1: scored without
    probabilities, as log loss refuses them) and more classes than a byte holds: every
    figure the same float."""
    unseen = seed % 4 == 1
    y_true, y_pred, proba, classes, index = _case(seed, n_classes, 400, unseen)
    proba = None if unseen else proba
    with _quiet():
        before = _score_before(y_true, y_pred, proba, classes)
        assert metrics.score("classification", y_true, y_pred, proba, classes) == before
        coded = metrics.score(
            "classification", y_true, y_pred, proba, classes, predicted_codes=index
        )
    assert coded == before


class _Pipeline:
    """What _evaluate reads of a pipeline given the final answers: its last step."""

    def __init__(self, classes: list[Any]) -> None:
        self.classes_ = np.array(classes, dtype=object)

    def __getitem__(self, _index: int) -> _Pipeline:
        return self


def test_known_answers_are_scored_on_their_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on the code before: the predicted labels (made from the answers' first
    maxima) were hashed back to codes, and scikit-learn's metrics got 8-byte codes
    (np.unique on them about 40 times a score: 4.4 ms each on 200,000 rows, 0.9 on one
    byte).  Now the first maxima are the codes, and the metrics see int8."""
    y_true, _, proba, classes, _ = _case(5, 3, 300, False)
    hashed: list[int] = []
    seen: list[Any] = []
    own_codes, own_f1 = metrics.class_codes, skm.f1_score

    def codes(values: Any, labels: Any) -> Any:
        hashed.append(len(values))
        return own_codes(values, labels)

    def f1(t: Any, p: Any, **kwargs: Any) -> Any:
        seen.append((t.dtype, p.dtype))
        return own_f1(t, p, **kwargs)

    monkeypatch.setattr(metrics, "class_codes", codes)
    monkeypatch.setattr(skm, "f1_score", f1)
    pipeline: Any = _Pipeline(classes)
    with _quiet():
        scores = evaluation._evaluate(pipeline, pipeline, y_true, "classification", classes, proba)
    assert hashed == [len(y_true)]  # the truth only
    assert seen == [(np.dtype(np.int8), np.dtype(np.int8))] * 2
    labels = np.array(classes, dtype=object).take(np.argmax(proba, axis=1))
    monkeypatch.setattr(metrics, "class_codes", own_codes)
    monkeypatch.setattr(skm, "f1_score", own_f1)
    with _quiet():
        assert scores == _score_before(y_true, labels, proba, classes)


@pytest.mark.parametrize("holdout", [0.0, 0.25], ids=["train", "holdout"])
def test_the_curve_s_rows_are_hashed_once_for_their_scores_and_the_curve(
    monkeypatch: pytest.MonkeyPatch, holdout: float
) -> None:
    """Fails on the code before: a boosting model's training scores and its staged curve
    each hashed the same labels to codes (~0.03 s of CPU each on 200,000 string labels,
    on the job's critical path).  Now the curve's rows are hashed once; the figures are
    those of the code before (computed here with the codes made each time)."""
    from ensembles.parallel import MemberPool
    from ensembles.specs import EvaluationSpec, parse_estimator_spec
    from ensembles.training import train
    from ensembles.validation import resolve_ensemble
    from tests.unit.datasets import training_data

    data = training_data("wine")
    spec = resolve_ensemble(
        parse_estimator_spec({"kind": "lightgbm", "params": {"n_estimators": 12}}), data.task
    )
    evaluation_spec = EvaluationSpec(holdout_fraction=holdout, cv_folds=0)

    def fitted() -> Any:
        return train(data, spec, evaluation_spec, 0, pool=MemberPool.local(2))

    before = fitted().metrics.model_dump()  # today's figures, compared with those below
    hashed: list[int] = []
    own_codes = metrics.class_codes

    def codes(values: Any, labels: Any) -> Any:
        hashed.append(len(values))
        return own_codes(values, labels)

    monkeypatch.setattr(metrics, "class_codes", codes)
    after = fitted().metrics.model_dump()
    # Each set of rows once: the training rows (their scores, and the curve without a
    # hold-out), the hold-out rows (their scores and the curve).
    expected = [after["train"]["n"]] + ([after["holdout"]["n"]] if holdout else [])
    assert sorted(hashed) == sorted(expected)
    monkeypatch.setattr(metrics, "class_codes", own_codes)
    monkeypatch.setattr(evaluation, "_class_codes", lambda *_args: None)  # as before
    assert after == before == fitted().metrics.model_dump()
