"""Quality figures: scores, OOB estimates, per-member scores and score curves.

Everything returned is plain JSON (floats, ints, lists, dicts; NaN becomes None) so it can
be stored and served as is.  Where a figure does not apply, the caller records why in
``notes`` instead of leaving a silent hole.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import joblib
import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn import metrics as skm
from sklearn.base import BaseEstimator

from ensembles import forest_oob
from ensembles.catalog import MemberWalk, OobSource
from ensembles.catalog.traits import Stages
from ensembles.members import (
    FloatArray,
    Member,
    member_class_indices,
    member_probabilities,
    member_values,
    members_of,
    oob_mask,
)
from ensembles.tasks import Task

MAX_CURVE_POINTS = 50
T = TypeVar("T")
R = TypeVar("R")
MAX_PAIRS = 500  # actual/predicted pairs kept for a regression's plots (a seeded sample)
Scores = dict[str, Any]
# Per-row OOB sums and counts, and the OOB curve, as one pass over the members made them.
OobTallies = tuple[FloatArray, NDArray[np.int64], list[dict[str, Any]]]


def primary_metric(task: Task) -> str:
    return "accuracy" if task == "classification" else "r2"


def _num(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def score(
    task: Task,
    y_true: NDArray[Any],
    y_pred: NDArray[Any],
    proba: FloatArray | None = None,
    classes: Sequence[Any] | None = None,
    *,
    predicted_codes: NDArray[np.intp] | None = None,
    true_codes: NDArray[np.intp] | None = None,
) -> Scores:
    """The API's metric set for one set of rows (``predicted_codes``: ``y_pred``'s class
    codes, when known: each label's position in ``classes``; ``true_codes``: ``y_true``'s,
    :func:`class_codes` of them, when already made)."""
    if task == "regression":
        return {
            "r2": _num(skm.r2_score(y_true, y_pred)) if len(y_true) > 1 else None,
            "rmse": _num(math.sqrt(skm.mean_squared_error(y_true, y_pred))),
            "mae": _num(skm.mean_absolute_error(y_true, y_pred)),
            "n": len(y_true),
        }
    labels = list(classes) if classes is not None else sorted(set(y_true.tolist()))
    # Integer codes, once: scikit-learn's metrics on object labels sort them again in each
    # call (np.unique), which cost seconds per score on 50,000 string labels. The figures
    # are the same: a label outside ``labels`` becomes -1, matching no class.
    t = class_codes(y_true, labels) if true_codes is None else true_codes
    p = class_codes(y_pred, labels) if predicted_codes is None else predicted_codes
    # Codes of one byte where the classes allow: scikit-learn's metrics find the values
    # of both arrays (np.unique) about 40 times per score, 4.4 ms each on 200,000 codes
    # of 8 bytes against 0.9 ms on 1 byte; the same values, so the same counts and figures.
    if len(labels) <= _BYTE_CODES:
        t, p = t.astype(np.int8), p.astype(np.int8)
    k = list(range(len(labels)))
    out: Scores = {
        "accuracy": _num(np.mean(t == p)) if len(t) else None,
        "balanced_accuracy": _num(_quiet(skm.balanced_accuracy_score, t, p)),
        "f1_macro": _num(skm.f1_score(t, p, average="macro", labels=k, zero_division=0)),
        "f1_weighted": _num(skm.f1_score(t, p, average="weighted", labels=k, zero_division=0)),
    }
    if proba is not None:
        out["log_loss"] = _num(skm.log_loss(t, proba, labels=k))
        out["roc_auc"] = _roc_auc(t, proba, k)
    out["confusion_matrix"] = skm.confusion_matrix(t, p, labels=k).tolist()
    out["n"] = len(y_true)
    return out


_BYTE_CODES = 127  # classes whose codes (and -1: none of them) fit in an int8


def class_codes(values: NDArray[Any], classes: Sequence[Any]) -> NDArray[np.intp]:
    """Each value's position in ``classes`` (-1 when it is none of them), by hashing."""
    return np.asarray(
        pd.Index(list(classes), dtype=object).get_indexer(np.asarray(values, dtype=object))
    )


def _quiet(fn: Any, *args: Any) -> float:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(fn(*args))


def _roc_auc(codes: NDArray[np.intp], proba: FloatArray, k: list[int]) -> float | None:
    """ROC AUC (one-vs-rest macro for multiclass); None when a class is absent from y_true."""
    present = set(np.unique(codes).tolist())
    if len(present) < 2 or len(present) < len(k) or -1 in present:
        return None
    if len(k) == 2:
        return _num(skm.roc_auc_score(codes == 1, proba[:, 1]))
    return _num(skm.roc_auc_score(codes, proba, multi_class="ovr", average="macro", labels=k))


def prediction_pairs(
    y_true: NDArray[Any], y_pred: NDArray[Any], basis: str, random_state: int
) -> dict[str, Any]:
    """Actual and predicted targets of the evaluated rows, for the predicted-vs-actual and
    residual plots: every row up to MAX_PAIRS, else a seeded sample of MAX_PAIRS rows (in
    row order), so a version's stored metrics stay small whatever the table's size."""
    n = len(y_true)
    rows = np.arange(n)
    if n > MAX_PAIRS:
        rows = np.sort(np.random.default_rng(random_state).choice(n, MAX_PAIRS, replace=False))
    actual = np.asarray(y_true, dtype=np.float64)[rows]
    predicted = np.asarray(y_pred, dtype=np.float64)[rows]
    return {
        "evaluated_on": basis,
        "n": n,
        "actual": [_num(v) for v in actual],
        "predicted": [_num(v) for v in predicted],
    }


# --- out-of-bag ------------------------------------------------------------------------


def oob_scores(
    ensemble: BaseEstimator,
    Xt: FloatArray,
    y: NDArray[Any],
    task: Task,
    classes: Sequence[Any],
    *,
    source: OobSource,
    tallied: OobTallies | None = None,
    codes: NDArray[np.intp] | None = None,
) -> tuple[Scores | None, str | None, list[dict[str, Any]]]:
    """OOB figures (or None and the reason they do not exist) and the OOB score curve.

    One pass over the members serves both: each member predicts its out-of-bag rows once,
    summed in member order exactly as scikit-learn's bagging sums them; forests
    (``source="forest"``) use scikit-learn's own OOB figures for the final value.
    ``tallied``: those sums, counts and curve, already made by a pass over the members
    (:mod:`ensembles.member_pass`).  A forest the service fitted without its own OOB
    pass gets its OOB attributes from them first (:mod:`ensembles.forest_oob`).
    ``codes``: ``class_codes(y, classes)``, when already made (a classification).
    """
    if source == "stages":
        if ensemble.subsample >= 1.0:
            return None, "gradient boosting leaves no rows out (subsample = 1)", []
        losses = [float(v) for v in ensemble.oob_scores_]
        return {"loss": float(ensemble.oob_score_), "loss_curve": losses}, None, []
    if tallied is None:
        drawn = members_of(ensemble) if source in ("members", "forest") else []
        members = [m for m in drawn if m.samples is not None]
        if not members:
            reason = f"{type(ensemble).__name__} leaves no rows out of its members' training"
            return None, reason, []
        tallied = _oob_tallies(members, Xt, y, task, classes)
    sums, counts, curve = tallied
    if source == "forest":  # fitted without its own OOB pass: its attributes from these
        if task == "classification" and codes is None:
            codes = class_codes(y, classes)
        forest_oob.settle(ensemble, sums, counts, y, codes)
    labels = np.asarray(classes, dtype=object)
    scored = counts > 0
    if not scored.any():
        return None, "every member was trained on every row (no row is out of bag)", []
    if source != "forest":
        out = oob_from_sums(sums, counts, y, task, classes)
        assert out is not None
        return out, None, curve
    if task == "classification":  # scikit-learn's own figures
        proba = np.asarray(ensemble.oob_decision_function_, dtype=np.float64)
        winners = np.argmax(proba, axis=1)
        # ``classes`` are the forest's ``classes_`` (unique): a winner's code is its index.
        same = list(getattr(ensemble, "classes_", [])) == list(classes)
        assert codes is not None
        out = score(
            task, y[scored], _like(y, labels[winners][scored]), proba[scored], classes,
            predicted_codes=winners[scored] if same else None, true_codes=codes[scored],
        )  # fmt: skip
    else:
        values = np.asarray(ensemble.oob_prediction_, dtype=np.float64)
        out = score(task, y[scored], values[scored])
    out["n_scored"] = int(scored.sum())
    return out, None, curve


def _oob_tallies(
    members: list[Member], Xt: FloatArray, y: NDArray[Any], task: Task, classes: Sequence[Any]
) -> OobTallies:
    """The OOB sums, counts and curve of ``members`` (those that drew samples)."""
    codes = class_codes(y, classes) if task == "classification" else None
    marks = set(checkpoints(len(members)))
    curve: list[dict[str, Any]] = []
    sums: FloatArray = np.zeros(len(y))
    counts: NDArray[np.int64] = np.zeros(len(y), dtype=np.int64)
    for i, (sums, counts) in enumerate(_accumulate_oob(members, Xt, task, len(classes)), start=1):
        if i in marks and counts.any():
            curve.append(oob_point(i, sums, counts, y, codes))
    return sums, counts, curve


def oob_point(
    i: int,
    sums: FloatArray,
    counts: NDArray[np.int64],
    y: NDArray[Any],
    codes: NDArray[np.intp] | None,
) -> dict[str, Any]:
    """The OOB curve's point after ``i`` members: the score of the rows scored so far."""
    scored = counts > 0
    value: float
    if codes is not None:
        # Every row's winner, then the scored rows counted: no copies of the scored rows
        # (50 points on 200,000 rows took seconds of each training); the same fraction.
        hits = np.count_nonzero((codes == first_maximum(sums)) & scored)
        value = hits / np.count_nonzero(scored)
    else:
        value = (
            skm.r2_score(y[scored], sums[scored] / counts[scored]) if scored.sum() > 1 else np.nan
        )
    return {"n_estimators": i, "score": _num(value), "n_scored": int(scored.sum())}


def first_maximum(sums: FloatArray) -> NDArray[np.intp]:
    """``np.argmax(sums, axis=1)``; two columns by one comparison (argmax along a short
    axis walks each row's few cells one at a time)."""
    if sums.shape[1] == 2:
        return (sums[:, 1] > sums[:, 0]).astype(np.intp)
    winners: NDArray[np.intp] = np.argmax(sums, axis=1)
    return winners


def oob_from_sums(
    sums: NDArray[Any],
    counts: NDArray[Any],
    y: NDArray[Any],
    task: Task,
    classes: Sequence[Any],
) -> Scores | None:
    """OOB figures from per-row tallies: summed probabilities or votes per class (the
    winner is the first maximum; probabilities are the normalised tallies), or summed
    predictions and the members that voted (the mean).  Rows no member left out are not
    scored; None when there are none."""
    scored = np.asarray(counts) > 0
    if not scored.any():
        return None
    if task == "classification":
        tallies = np.asarray(sums, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            proba = tallies / tallies.sum(axis=1)[:, np.newaxis]
        winners = np.argmax(tallies, axis=1)
        labels = np.asarray(classes, dtype=object)
        out = score(task, y[scored], _like(y, labels[winners][scored]), proba[scored], classes)
    else:
        values = np.asarray(sums, dtype=np.float64) / np.maximum(counts, 1)
        out = score(task, y[scored], values[scored])
    out["n_scored"] = int(scored.sum())
    return out


def thinned(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A curve's points (one per member, ``n_estimators`` from 1) at no more than
    MAX_CURVE_POINTS checkpoints."""
    marks = set(checkpoints(len(points)))
    return [p for p in points if p["n_estimators"] in marks]


def _like(y: NDArray[Any], pred: NDArray[Any]) -> NDArray[Any]:
    return pred.astype(y.dtype) if y.dtype != object else pred


def _accumulate_oob(
    members: list[Member], Xt: FloatArray, task: Task, k: int
) -> Iterator[tuple[FloatArray, NDArray[np.int64]]]:
    """Running OOB sums (probabilities, votes or values) and counts after each member."""
    n = Xt.shape[0]
    sums = np.zeros((n, k)) if task == "classification" else np.zeros(n)
    counts = np.zeros(n, dtype=np.int64)

    def predicted(m: Member) -> tuple[NDArray[np.bool_], NDArray[Any]] | None:
        mask = oob_mask(m, n)
        if mask is None or not mask.any():
            return None
        rows = Xt[mask, :]
        if task == "regression":
            return mask, member_values(m, rows)
        if hasattr(m.estimator, "predict_proba"):
            return mask, member_probabilities(m, rows, k)
        return mask, member_class_indices(m, rows)

    # Members predict a batch at a time on the threads allowed (trees release the GIL);
    # the sums still grow in member order, so every figure is as if done one by one.
    batch = 4 * threads()
    for start in range(0, len(members), batch):
        for m, out in zip(
            members[start : start + batch],
            each(predicted, members[start : start + batch]),
            strict=True,
        ):
            if out is not None:
                mask, values = out
                counts += mask
                if task == "regression" or hasattr(m.estimator, "predict_proba"):
                    sums[mask] += values
                else:
                    sums[np.flatnonzero(mask), values] += 1
            yield sums, counts


def threads() -> int:
    """Threads allowed by the caller's joblib context (training sets one; else 1)."""
    return max(1, int(joblib.effective_n_jobs()))


def each(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn`` over ``items`` in order, on the threads allowed."""
    allowed = min(threads(), len(items))
    if allowed <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(allowed) as pool:
        return list(pool.map(fn, items))


def staged_curve(
    ensemble: BaseEstimator,
    Xt: FloatArray,
    y: NDArray[Any],
    task: Task,
    stages: Stages | None = None,
    staged: Sequence[Any] | None = None,
    staged_codes: list[NDArray[Any]] | None = None,
    true_codes: NDArray[np.intp] | None = None,
) -> list[dict[str, Any]]:
    """Score after each boosting stage (sampled to at most MAX_CURVE_POINTS points); a
    library's model through its own staged prediction (``stages``), at the checkpoints
    (``staged``: its answers there, when a walk of the trees already gave them;
    ``staged_codes``: their labels' positions in ``classes_``, when known: a label is its
    class exactly when its code is the class's, so the hits are counted on the codes, with
    no comparison of label objects, 0.57 s of CPU for 50 points on 200,000 rows, and
    ``staged``'s labels are never asked for: made from codes, they cost 0.12-0.15 s;
    ``true_codes``: ``class_codes(y, classes_)``, when the scores already made them)."""
    if stages is not None:
        marks = checkpoints(stages.count(ensemble))
        answers: Sequence[Any] = stages.predict(ensemble, Xt, marks) if staged is None else staged
        if len(answers) != len(marks):
            raise ValueError("staged answers and checkpoints differ in number")
    else:
        staged_predict = getattr(ensemble, "staged_predict", None)
        if staged_predict is None:
            return []
        preds = list(staged_predict(Xt))
        kept = set(checkpoints(len(preds)))
        marks = [i for i in range(1, len(preds) + 1) if i in kept]
        answers = [preds[i - 1] for i in marks]
    # Class codes once: scikit-learn's accuracy_score sorts the labels at every call (30 s
    # of a 500-round LightGBM's 50 points on 200,000 string labels); the same fraction.
    classes = getattr(ensemble, "classes_", None) if task == "classification" else None
    truth = None
    if classes is not None:
        truth = class_codes(y, list(classes)) if true_codes is None else true_codes
    codes = staged_codes if staged is not None and staged_codes is not None else None

    def predicted(at: int) -> Any:
        answer = answers[at]
        return np.ravel(answer) if np.ndim(answer) == 2 else answer

    points = []
    for at, i in enumerate(marks):
        if task != "classification":
            value = skm.r2_score(y, predicted(at))
        elif classes is None or truth is None:
            value = skm.accuracy_score(y, predicted(at))
        elif not len(truth):
            value = np.nan
        elif codes is not None:
            value = int(np.count_nonzero(truth == codes[at])) / len(truth)
        else:
            value = _hits(truth, np.asarray(predicted(at)), classes) / len(truth)
        points.append({"n_estimators": i, "score": _num(value)})
    return points


def _hits(truth: NDArray[np.intp], pred: NDArray[Any], classes: Sequence[Any]) -> int:
    """Rows whose predicted label is their class (``truth``: class codes), counted class
    by class: a comparison with one label is vectorised where hashing every label is not."""
    return sum(
        int(np.count_nonzero((truth == j) & (pred == label))) for j, label in enumerate(classes)
    )


def checkpoints(total: int) -> list[int]:
    if total <= MAX_CURVE_POINTS:
        return list(range(1, total + 1))
    return sorted({round(total * j / MAX_CURVE_POINTS) for j in range(1, MAX_CURVE_POINTS + 1)})


# --- members ---------------------------------------------------------------------------


def member_scores(
    ensemble: BaseEstimator,
    Xt: FloatArray,
    y: NDArray[Any],
    task: Task,
    classes: Sequence[Any],
    basis: str,
    *,
    walk: MemberWalk,
    primaries: list[float | None] | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """Each named member's own score, or min/mean/max over a homogeneous ensemble's members
    (``primaries``: their scores, already measured by a pass over them)."""
    metric = primary_metric(task)
    labels = np.asarray(classes, dtype=object)
    if walk == "named":
        out = []
        for name, est in ensemble.named_estimators_.items():
            if est == "drop":
                continue
            m = Member(name, est, None, None, 1.0)
            out.append({"name": name, basis: _member_score(m, Xt, y, task, labels)})
        return out, None
    # Homogeneous ensembles can have thousands of members: only the primary metric, in numpy.
    if primaries is not None:
        return [_spread("members", basis, metric, primaries)], None
    members = (
        members_of(ensemble, with_samples=False) if walk in ("bagged", "trees", "bites") else []
    )
    if members:
        if task == "regression":
            values = each(lambda m: primary(task, y, member_values(m, Xt)), members)
        else:
            codes = class_codes(y, classes)
            values = each(lambda m: primary(task, codes, member_class_indices(m, Xt)), members)
        return [_spread("members", basis, metric, values)], None
    if walk == "boosted":  # AdaBoost: members predict raw labels
        values = [primary(task, y, np.asarray(est.predict(Xt))) for est in ensemble.estimators_]
        return [_spread("members", basis, metric, values)], None
    return [], f"{type(ensemble).__name__} members are not predictors of their own"


def _member_score(
    m: Member, Xt: FloatArray, y: NDArray[Any], task: Task, labels: NDArray[Any]
) -> Scores:
    if task == "regression":
        return score(task, y, member_values(m, Xt))
    pred = _like(y, labels[member_class_indices(m, Xt)])
    proba = None
    if hasattr(m.estimator, "predict_proba"):
        proba = member_probabilities(m, Xt, len(labels))
    return score(task, y, pred, proba, list(labels))


def primary(task: Task, y: NDArray[Any], pred: NDArray[Any]) -> float | None:
    """Accuracy or r2, computed directly (scikit-learn's checks cost more than the sum)."""
    if task == "classification":
        return float(np.mean(pred == y))
    residual = float(np.sum((y - pred) ** 2))
    total = float(np.sum((y - np.mean(y)) ** 2))
    return None if total == 0 else 1.0 - residual / total


def _spread(name: str, basis: str, metric: str, values: list[Any]) -> dict[str, Any]:
    clean = [v for v in values if v is not None]
    if not clean:
        return {"name": name, "n_members": len(values), basis: None}
    return {
        "name": name,
        "n_members": len(values),
        basis: {metric: {"min": min(clean), "mean": float(np.mean(clean)), "max": max(clean)}},
    }


def mean_scores(folds: list[Scores]) -> Scores:
    """Mean and std of each numeric metric over CV folds."""
    keys = [k for k, v in folds[0].items() if isinstance(v, int | float) and k != "n"]
    means: Scores = {}
    stds: Scores = {}
    for key in keys:
        vals = [f[key] for f in folds if f.get(key) is not None]
        means[key] = float(np.mean(vals)) if vals else None
        stds[key] = float(np.std(vals)) if vals else None
    return {"n_folds": len(folds), **means, "std": stds, "folds": folds}
