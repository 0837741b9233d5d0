"""Bias–variance decomposition of the ensemble and of one of its members trained alone.

Each round draws a bootstrap sample of the training rows (with a fresh seed for every
random choice of the estimators), fits the spec on it and predicts the hold-out rows; the
spread of those predictions over rounds is the variance, the error of their central
prediction the bias. The ensemble and its member see the same samples and seeds in each
round (paired), so their figures compare like for like.

Squared loss (regression): per row, with f̄ the mean prediction over rounds,
E[(f − y)²] = (f̄ − y)² + E[(f − f̄)²]; ``bias`` is the mean squared bias. With one target
per row the noise cannot be told apart from the bias: it is inside ``bias``.

0-1 loss (classification, Domingos 2000, noise-free): per row, the main prediction y_m
is the most frequent prediction over rounds (ties: the first class in ``classes``
order), bias B = [y_m ≠ y], variance V = P(f ≠ y_m), loss L = P(f ≠ y). Then L = B + V on
unbiased rows and L = B − P(f = y | f ≠ y_m)·V on biased ones (exact, any number of
classes); ``net_variance`` = mean of those signed terms, so loss = bias + net_variance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensembles.catalog import KINDS
from ensembles.errors import Location, Problem
from ensembles.specs import EstimatorSpec, EvaluationSpec
from ensembles.tasks import Task

ROUNDS: Location = ("evaluation", "bias_variance", "rounds")
FIELD: Location = ("evaluation", "bias_variance")
MAX_SEED = 2**31 - 1
# fit_predict(spec, row positions of the training rows, seed) -> predictions on the hold-out
FitPredict = Callable[[EstimatorSpec, NDArray[np.intp], int], NDArray[Any]]


def problems(evaluation: EvaluationSpec, max_rounds: int) -> list[Problem]:
    """What makes ``evaluation.bias_variance`` impossible before any training."""
    asked = evaluation.bias_variance
    if asked is None:
        return []
    found = []
    if asked.rounds > max_rounds:
        found.append(
            Problem(ROUNDS, f"must be at most {max_rounds} (the server's bias-variance bound)")
        )
    if evaluation.holdout_fraction <= 0:
        found.append(
            Problem(
                FIELD,
                "needs hold-out rows to score the refitted models on: set "
                "evaluation.holdout_fraction above 0",
            )
        )
    return found


def member_spec(spec: EstimatorSpec, task: Task) -> tuple[EstimatorSpec, str | None]:
    """The member trained alone, and a note when it is a stand-in.

    The slot member of the bagging family and AdaBoost (``estimator``), the first named
    member of voting and stacking; for forests and gradient boosting (whose members are
    built inside scikit-learn) a decision tree with the ensemble's tree parameters; a base
    learner is its own member.
    """
    kind = KINDS[spec.kind]
    if kind.family == "base":
        return spec, "the spec is a single estimator: it is its own member"
    if spec.estimator is not None:
        return spec.estimator, None
    if spec.estimators:
        first = spec.estimators[0]
        plain = EstimatorSpec(
            kind=first.kind,
            params=first.params,
            estimator=first.estimator,
            estimators=first.estimators,
            final_estimator=first.final_estimator,
        )
        return plain, f"the first member, {first.name!r}"
    tree = KINDS["decision_tree"]
    params = {p.name: p.default_for(task) for p in tree.params_for(task)}
    # Parameters of the same name and a value a tree takes (LightGBM's max_depth -1 is not).
    carried = {
        k: v
        for k, v in spec.params.items()
        if k in params and k != "criterion" and tree.param(k).accepts(v, task)  # type: ignore[union-attr]
    }
    if kind.members == "trees":  # forests: the tree template, same criterion
        carried.update({k: v for k, v in spec.params.items() if k == "criterion"})
        template = getattr(kind.classes[task](), "estimator", None)
        if getattr(template, "splitter", "best") == "random":
            carried["splitter"] = "random"
        note = "a decision tree with the forest's tree parameters"
    else:
        note = f"a decision tree with the tree parameters of {spec.kind}'s stages"
    params.update(carried)
    return EstimatorSpec(kind="decision_tree", params=params), note


def squared(preds: NDArray[np.float64], y: NDArray[np.float64]) -> dict[str, float]:
    """Rounds x rows predictions -> loss, bias (squared) and variance, averaged over rows."""
    central = preds.mean(axis=0)
    return {
        "loss": float(np.mean((preds - y) ** 2)),
        "bias": float(np.mean((central - y) ** 2)),
        "variance": float(np.mean(preds.var(axis=0))),
    }


def zero_one(preds: NDArray[np.int64], y: NDArray[np.int64], n_classes: int) -> dict[str, float]:
    """Rounds x rows predicted class indices -> Domingos' decomposition of the 0-1 loss."""
    rounds = preds.shape[0]
    counts = np.stack([(preds == c).sum(axis=0) for c in range(n_classes)])  # classes x rows
    main = np.argmax(counts, axis=0)  # first class wins ties
    biased = main != y
    variance = 1.0 - counts[main, np.arange(len(y))] / rounds
    loss = np.mean(preds != y, axis=0)
    right = counts[y, np.arange(len(y))] / rounds  # P(f = y)
    # On biased rows P(f = y | f != y_m) * V = P(f = y): the signed term is -P(f = y).
    signed = np.where(biased, -right, variance)
    return {
        "loss": float(loss.mean()),
        "bias": float(biased.mean()),
        "variance": float(variance.mean()),
        "net_variance": float(signed.mean()),
        "variance_unbiased": float(np.mean(np.where(biased, 0.0, variance))),
        "variance_biased": float(np.mean(np.where(biased, variance, 0.0))),
    }


def decompose(
    spec: EstimatorSpec,
    task: Task,
    classes: list[Any],
    n_train: int,
    y_hold: NDArray[Any],
    rounds: int,
    random_state: int,
    fit_predict: FitPredict,
    tick: Callable[[int, int], None],
) -> dict[str, Any]:
    """The ``metrics.bias_variance`` block (see the module for the formulas)."""
    member, member_note = member_spec(spec, task)
    rng = np.random.RandomState(random_state)
    runs: dict[str, list[NDArray[Any]]] = {"ensemble": [], "single_member": []}
    tick(0, rounds)
    for r in range(rounds):
        rows = rng.randint(0, n_train, n_train).astype(np.intp)
        seed = int(rng.randint(MAX_SEED))
        runs["ensemble"].append(fit_predict(spec, rows, seed))
        runs["single_member"].append(fit_predict(member, rows, seed))
        tick(r + 1, rounds)
    out: dict[str, Any] = {
        "rounds": rounds,
        "loss": "zero_one" if task == "classification" else "squared",
        "n_holdout": len(y_hold),
    }
    if task == "classification":
        index = {c.item() if isinstance(c, np.generic) else c: i for i, c in enumerate(classes)}
        truth = np.asarray([index[v] for v in y_hold.tolist()], dtype=np.int64)
        for name, preds in runs.items():
            coded = np.asarray([[index[v] for v in p.tolist()] for p in preds], dtype=np.int64)
            out[name] = zero_one(coded, truth, len(classes))
    else:
        truth_f = np.asarray(y_hold, dtype=np.float64)
        for name, preds in runs.items():
            out[name] = squared(np.asarray(preds, dtype=np.float64), truth_f)
    out["member_spec"] = member.model_dump(exclude_none=True)
    if member_note:
        out["member_note"] = member_note
    return out
