"""AdaBoost's hardest rows: the training rows with the largest final boosting weights.

scikit-learn keeps no row weights after fitting, but they follow from the fitted members:
each member's predictions on the training rows decide its error and the reweighting, so
replaying the loop of ``sklearn/ensemble/_weight_boosting.py`` (scikit-learn 1.9) gives
the weights every member was fitted with, bit for bit:

* start: every row 1/n (no sample weights are passed);
* before each member: weights clipped below at float64's eps (scikit-learn's guard);
* SAMME (classifier): error ε = Σ w·[wrong] / Σ w; stop when ε <= 0; the member's weight
  α = lr·(ln((1 − ε)/ε) + ln(K − 1)); w ← exp(ln w + α·[wrong]·[w > 0]);
* AdaBoost.R2 (regressor): e_i = |f(x_i) − y_i| / max_i |f(x_i) − y_i| (squared, or
  1 − exp(−e) for the square and exponential losses); ε = Σ w·e; stop when ε <= 0 or
  ε >= 0.5; β = ε/(1 − ε); w_i ← w_i·β^((1 − e_i)·lr);
* then w is normalised to sum 1.

scikit-learn skips the update after its last allowed round (no member follows); the replay
applies every kept member's update, so the final weights also carry what the last member
got wrong. Each replayed error is checked against the fitted ``estimator_errors_``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, is_classifier

FloatArray = NDArray[np.float64]
TOP_ROWS = 20
_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class Replay:
    """The weights before each member (``seen[m]``), the final weights, and the replayed
    errors and member weights (α for SAMME, ln(1/β)·lr for R2)."""

    seen: list[FloatArray]
    final: FloatArray
    errors: list[float]
    alphas: list[float]


def replay_samme(wrong: NDArray[np.bool_], n_classes: int, learning_rate: float) -> Replay:
    """SAMME's row weights from each member's mistakes on the training rows (M x n)."""
    n = wrong.shape[1]
    w = np.full(n, 1.0 / n)
    seen: list[FloatArray] = []
    errors: list[float] = []
    alphas: list[float] = []
    for miss in wrong:
        w = np.clip(w, _EPS, None)
        seen.append(w.copy())
        error = float(np.average(miss, weights=w))
        errors.append(error)
        if error <= 0:
            alphas.append(1.0)
            break
        alpha = learning_rate * (np.log((1.0 - error) / error) + np.log(n_classes - 1.0))
        alphas.append(float(alpha))
        w = np.exp(np.log(w) + alpha * miss * (w > 0))
        total = float(w.sum())
        if not np.isfinite(total) or total <= 0:
            break
        w = w / total
    return Replay(seen, w / w.sum(), errors, alphas)


def replay_r2(predictions: FloatArray, y: FloatArray, loss: str, learning_rate: float) -> Replay:
    """AdaBoost.R2's row weights from each member's predictions on the training rows."""
    n = predictions.shape[1]
    w = np.full(n, 1.0 / n)
    seen: list[FloatArray] = []
    errors: list[float] = []
    alphas: list[float] = []
    for pred in predictions:
        w = np.clip(w, _EPS, None)
        seen.append(w.copy())
        mask = w > 0
        e = np.abs(pred - y)[mask]
        top = e.max()
        if top != 0:
            e = e / top
        if loss == "square":
            e = e**2
        elif loss == "exponential":
            e = 1.0 - np.exp(-e)
        error = float((w[mask] * e).sum())
        errors.append(error)
        if error <= 0 or error >= 0.5:
            alphas.append(1.0 if error <= 0 else 0.0)
            break
        beta = error / (1.0 - error)
        alphas.append(float(learning_rate * np.log(1.0 / beta)))
        w[mask] *= np.power(beta, (1.0 - e) * learning_rate)
        w = w / w.sum()
    return Replay(seen, w / w.sum(), errors, alphas)


def replay(ensemble: BaseEstimator, Xt: Any, y: Any) -> Replay:
    """Replay a fitted AdaBoost on the rows it was fitted on (preprocessed, in order)."""
    preds = np.stack([np.asarray(est.predict(Xt)) for est in ensemble.estimators_])
    if is_classifier(ensemble):
        wrong = preds != np.asarray(y)[np.newaxis, :]
        return replay_samme(wrong, len(ensemble.classes_), float(ensemble.learning_rate))
    return replay_r2(
        preds.astype(np.float64),
        np.asarray(y, dtype=np.float64),
        str(ensemble.loss),
        float(ensemble.learning_rate),
    )


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def hardest_rows(
    ensemble: BaseEstimator,
    Xt: Any,
    y: Any,
    positions: NDArray[np.intp],
    top: int = TOP_ROWS,
) -> tuple[dict[str, Any] | None, str | None]:
    """The ``metrics.hardest_rows`` block, or None and why.

    ``positions[i]`` is the uploaded table's row index of training row i (the hold-out
    split leaves the training rows in a shuffled order).
    """
    found = replay(ensemble, Xt, y)
    fitted = len(ensemble.estimators_)
    expected = np.asarray(ensemble.estimator_errors_[: len(found.errors)], dtype=np.float64)
    # scikit-learn records no error for a regressor's lone too-weak first member (1.0 stays).
    comparable = [i for i, err in enumerate(found.errors) if err < 0.5 or is_classifier(ensemble)]
    if len(found.seen) != fitted or not np.allclose(
        np.asarray(found.errors)[comparable], expected[comparable], rtol=1e-9, atol=1e-12
    ):
        return None, "the replayed AdaBoost errors differ from the fitted ones"
    order = np.argsort(-found.final, kind="stable")[:top]
    predicted = np.asarray(ensemble.predict(Xt[order]))
    y_arr = np.asarray(y)
    rows = [
        {
            "row": int(positions[i]),
            "weight": float(found.final[i]),
            "target": _plain(y_arr[i]),
            "predicted": _plain(p),
        }
        for i, p in zip(order.tolist(), predicted, strict=True)
    ]
    return {
        "rows": rows,
        "weight_share": float(found.final[order].sum()),
        "uniform_share": len(order) / len(found.final),
        "n_rows": len(found.final),
        "n_members": fitted,
    }, None
