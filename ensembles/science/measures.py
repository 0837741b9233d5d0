"""The science blocks of a version's metrics, from what training already has at hand.

Training calls :func:`measure` once the model is fitted and scored: diversity (or, for
regression, ambiguity) on rows the members did not train on, out-of-fold scores, and
AdaBoost's hardest rows. Each block that does not apply is None; a note says why when the
block applies to the kind but this fit could not have it (a note about a measure no fit of
the kind ever has would explain nothing: the report names what is absent in plain words).

Cost is bounded whatever the ensemble: members are judged on at most ``MAX_ROWS`` rows
(a seeded sample) and the first ``MAX_MEMBERS`` members; the pairwise measures cost
members² x rows (200 members x 2,000 rows: ~0.1 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.pipeline import Pipeline
from threadpoolctl import threadpool_limits

from ensembles.catalog import Kind
from ensembles.science import diversity as div
from ensembles.science.oof import OutOfFold, stacking_oof
from ensembles.science.outputs import MemberOutputs, member_outputs, walk_of
from ensembles.tasks import Task

MAX_ROWS = 2_000
MAX_MEMBERS = 200

# Where members are judged ("holdout", "oob" or "oof"), their outputs there, the rows'
# targets and the ensemble's answer on them (None: not on these rows).
Judged = tuple[str, MemberOutputs, NDArray[Any], NDArray[Any] | None]


@dataclass
class Evidence:
    """What training hands over: the fitted pipeline, its rows and its scores."""

    pipeline: Pipeline
    kind: Kind
    task: Task
    classes: list[Any]
    Xt: NDArray[Any]  # the preprocessed training rows, in fitting order
    y_train: NDArray[Any]
    train_positions: NDArray[np.intp]  # row index in the uploaded table of each training row
    Xht: NDArray[Any] | None  # the preprocessed hold-out rows (None: no hold-out)
    y_hold: NDArray[Any] | None
    oob: dict[str, Any] | None
    cv_folds: OutOfFold | None  # out-of-fold predictions of training's cross-validation
    random_state: int
    # The members' outputs training already has on the rows judged (hold-out, else OOB):
    # a pass of forests' and bagging's members (ensembles.member_pass); None: ask them.
    judged: Judged | None = None


def sample_rows(n: int, random_state: int) -> NDArray[np.intp] | None:
    if n <= MAX_ROWS:
        return None
    rng = np.random.RandomState(random_state)
    return np.sort(rng.choice(n, MAX_ROWS, replace=False)).astype(np.intp)


def measure(ev: Evidence, notes: list[str]) -> dict[str, Any]:
    """``diversity``, ``ambiguity``, ``oof`` and ``hardest_rows`` (None where they do not
    apply, with the reason appended to ``notes``).

    BLAS stays single-threaded, as in training: the products are small, and threads
    fighting over the cores cost more than they give (measured 3x slower on 2 cores).
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _measure(ev, notes)


def _measure(ev: Evidence, notes: list[str]) -> dict[str, Any]:
    ensemble = ev.pipeline[-1]
    out: dict[str, Any] = {"diversity": None, "ambiguity": None, "oof": None, "hardest_rows": None}
    folds = ev.cv_folds
    # Stacking (ensemble_selection fits its library on folds too, but is fitted as a vote:
    # its out-of-fold scores are in ``metrics.selection``).
    if ev.kind.combination == "final_estimator":
        folds = stacking_oof(ensemble, ev.Xt, ev.y_train, ev.task)
    if folds is not None:
        out["oof"] = folds.report(ev.y_train)
    elif ev.kind.predicts_out_of_fold:  # voting without cv_folds: say how to get them
        notes.append(
            "no out-of-fold scores: set evaluation.cv_folds to score the vote and each "
            "member on rows it did not train on"
        )
    block, reason = _diversity(ev, folds)
    out["diversity" if ev.task == "classification" else "ambiguity"] = block
    if reason:
        what = "diversity" if ev.task == "classification" else "ambiguity"
        notes.append(f"no {what}: {reason}")
    if ev.kind.hardest_rows is not None:
        found = ev.kind.hardest_rows(ensemble, ev.Xt, ev.y_train, ev.train_positions)
        out["hardest_rows"], why = found
        if why:
            notes.append(f"no hardest rows: {why}")
    return out


def _diversity(ev: Evidence, folds: OutOfFold | None) -> tuple[dict[str, Any] | None, str | None]:
    """The diversity (classification) or ambiguity (regression) block, or why not."""
    ensemble = ev.pipeline[-1]
    if ev.kind.members == "none" and walk_of(ensemble) is not None:
        return None, None  # boosting's stages never predict the target: nothing to explain
    found = _judged_outputs(ev, folds)
    if isinstance(found, str):
        return None, found
    basis, outputs, y, ensemble_out = found
    n_members = outputs.outputs.shape[0]
    if n_members < 2:
        return None, "fewer than two members"
    notes = []
    if outputs.n_members_total > n_members:
        notes.append(f"the first {n_members} of {outputs.n_members_total} members")
    if ev.task == "classification":
        truth = pd.Index(ev.classes).get_indexer(y)
        correct = outputs.outputs == truth[np.newaxis, :]
        accuracy = float(np.mean(ensemble_out == y)) if ensemble_out is not None else None
        block = div.diversity(
            correct,
            outputs.outputs,
            outputs.valid,
            len(ev.classes),
            names=outputs.names,
            n_members_total=outputs.n_members_total,
            ensemble_accuracy=accuracy,
        )
        if ensemble_out is None and ev.oob:
            block["condorcet"]["ensemble_accuracy"] = ev.oob.get("accuracy")
    else:
        weighted = bool(np.any(outputs.weights != outputs.weights[0]))
        block = div.ambiguity(
            outputs.outputs.astype(np.float64),
            np.asarray(y, dtype=np.float64),
            outputs.valid,
            outputs.weights if weighted else None,
        )
        block["combination"] = _combination(ev, weighted)
        if ensemble_out is not None:
            block["model_mse"] = float(np.mean((np.asarray(ensemble_out, dtype=float) - y) ** 2))
    if notes:
        block["note"] = "; ".join(notes)
    return {"evaluated_on": basis, **block}, None


def _combination(ev: Evidence, weighted: bool) -> str:
    """What "ensemble" means in the ambiguity block."""
    if weighted:
        return "weighted_mean: the members' weighted mean, as the model combines them"
    if ev.kind.combination == "vote_or_median":  # regression: AdaBoost.R2
        return "mean: the members' plain mean (the model takes their weighted median)"
    if ev.kind.combination == "final_estimator":
        return "mean: the members' plain mean (the model feeds them to its final estimator)"
    return "mean: the members' mean, as the model combines them"


def _judged_outputs(ev: Evidence, folds: OutOfFold | None) -> Judged | str:
    """Members' outputs on rows they did not train on: hold-out, else OOB, else OOF."""
    if ev.judged is not None:
        return ev.judged
    ensemble = ev.pipeline[-1]
    if ev.Xht is not None and ev.y_hold is not None:
        rows = sample_rows(len(ev.y_hold), ev.random_state)
        outputs = member_outputs(
            ensemble, ev.Xht, ev.task, out_of_bag=False, max_members=MAX_MEMBERS, rows=rows
        )
        if outputs is None:
            return f"{type(ensemble).__name__} has no members that predict on their own"
        X = ev.Xht if rows is None else ev.Xht[rows]
        y = ev.y_hold if rows is None else ev.y_hold[rows]
        return "holdout", outputs, y, np.asarray(ensemble.predict(X))
    rows = sample_rows(len(ev.y_train), ev.random_state)
    outputs = member_outputs(
        ensemble, ev.Xt, ev.task, out_of_bag=True, max_members=MAX_MEMBERS, rows=rows
    )
    y = ev.y_train if rows is None else ev.y_train[rows]
    if outputs is not None:
        return "oob", outputs, y, None
    if folds is not None and len(folds.members) >= 1:
        names = list(folds.members)
        chosen = np.arange(len(ev.y_train)) if rows is None else rows
        matrix = np.stack([folds.members[n][chosen] for n in names])
        oof = MemberOutputs(
            names,
            matrix,
            np.ones(matrix.shape, dtype=bool),
            np.ones(len(names)),
            len(names),
        )
        return "oof", oof, y, folds.ensemble[chosen]
    return (
        "no rows the members did not train on (no hold-out, no out-of-bag rows, no "
        "out-of-fold predictions): set evaluation.holdout_fraction above 0"
    )
