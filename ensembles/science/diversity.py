"""Diversity of a classifier ensemble's members (Kuncheva & Whitaker, 2003), the
Condorcet check, and the ambiguity decomposition of a regressor ensemble (Krogh &
Vedelsby, 1995): why an ensemble beats its members, in numbers.

Everything here is arithmetic on arrays the caller produced: ``correct[i, j]`` (member
``i`` right on row ``j``), the members' predicted class indices, and ``valid[i, j]``
(member ``i`` did not train on row ``j``: every cell on hold-out rows, the out-of-bag cells
otherwise). On hold-out rows every formula is exactly the paper's; with out-of-bag cells
each pair is compared on the rows out of bag for both, and each row's non-pairwise terms
use the ``L_j`` members that row is out of bag for (the paper's ``L``, per row).

Undefined values are explicit, never NaN:
* a pair with no common row: every pairwise value of that pair is None;
* Yule's Q when N11·N00 + N01·N10 = 0 and the correlation ρ when a marginal is 0 (a member
  always right or always wrong on the common rows): 0/0, None;
* Cohen's κ when the chance agreement is 1 (both members always predict one same class):
  0/0, None;
* the interrater agreement when p̄(1 − p̄) = 0 (every member right on every row, or wrong
  on every row): complete agreement, 1.0;
* entropy and the interrater agreement need two members on a row: rows with fewer are
  left out (on hold-out rows that means: fewer than two members, no figure).
Means over pairs leave None out and say how many pairs were undefined.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import binom

BoolArray = NDArray[np.bool_]
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

MAX_MATRIX_MEMBERS = 50
PAIRWISE = ("disagreement", "q_statistic", "correlation", "double_fault", "kappa")
ALL_MEMBERS_UP_TO = 101  # the Condorcet list gives every n up to here, then 50 points


def pair_counts(
    correct: BoolArray, valid: BoolArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """N11, N10, N01, N00 for every ordered pair (i, k): rows both right, i right and k
    wrong, i wrong and k right, both wrong — counted on the rows valid for both."""
    right = (correct & valid).astype(np.float64)
    wrong = (~correct & valid).astype(np.float64)
    n11 = right @ right.T
    n10 = right @ wrong.T
    n00 = wrong @ wrong.T
    return n11, n10, n10.T.copy(), n00


def _divide(num: FloatArray, den: FloatArray) -> FloatArray:
    """num / den with NaN where den is 0 (NaN marks "undefined" until the JSON step)."""
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def pairwise_matrices(
    correct: BoolArray, labels: IntArray, valid: BoolArray, n_classes: int
) -> dict[str, FloatArray]:
    """Members x members matrices of the five pairwise measures (NaN: undefined).

    Disagreement (N01 + N10)/N, Yule's Q (N11N00 − N01N10)/(N11N00 + N01N10), correlation
    ρ (N11N00 − N01N10)/√((N11+N10)(N01+N00)(N11+N01)(N10+N00)), double fault N00/N, all on
    the oracle outputs; Cohen's κ on the predicted labels, (θ1 − θ2)/(1 − θ2) with θ1 the
    share of rows where both predict the same class and θ2 = Σ_c a_c·b_c the agreement
    expected from each member's class proportions (Dietterich's κ of kappa-error diagrams).
    """
    n11, n10, n01, n00 = pair_counts(correct, valid)
    n = n11 + n10 + n01 + n00
    det = n11 * n00 - n01 * n10
    nan_where_empty = np.where(n > 0, 1.0, np.nan)
    theta1 = np.zeros_like(n)
    theta2 = np.zeros_like(n)
    v = valid.astype(np.float64)
    everywhere = bool(valid.all())
    for c in range(n_classes):
        said = ((labels == c) & valid).astype(np.float64)
        theta1 += said @ said.T
        if everywhere:  # hold-out rows: the counts do not depend on the pair
            counts = said.sum(axis=1)
            theta2 += np.outer(counts, counts)
        else:  # count_i(c) * count_k(c) on the rows common to i and k
            theta2 += (said @ v.T) * (v @ said.T)
    theta1 = _divide(theta1, n)
    theta2 = _divide(theta2, n * n)
    return {
        "disagreement": _divide(n01 + n10, n),
        "q_statistic": _divide(det, n11 * n00 + n01 * n10) * nan_where_empty,
        "correlation": _divide(det, np.sqrt((n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)))
        * nan_where_empty,
        "double_fault": _divide(n00, n),
        "kappa": _divide(theta1 - theta2, 1.0 - theta2) * nan_where_empty,
    }


def non_pairwise(correct: BoolArray, valid: BoolArray) -> dict[str, float | None]:
    """Entropy E, Kohavi–Wolpert variance and interrater agreement κ (K&W 2003).

    With l_j members right on row j out of L_j:  E = mean_j min(l_j, L_j − l_j) /
    (L_j − ⌈L_j/2⌉);  KW = mean_j l_j (L_j − l_j) / L_j²;  κ = 1 − Σ_j l_j (L_j − l_j)/L_j /
    (p̄ (1 − p̄) Σ_j (L_j − 1)), p̄ = Σ_j l_j / Σ_j L_j the mean member accuracy.
    Rows with fewer than two members are left out of all three.
    """
    big_l = valid.sum(axis=0).astype(np.float64)
    small_l = (correct & valid).sum(axis=0).astype(np.float64)
    keep = big_l >= 2
    if not keep.any():
        return {"entropy": None, "kw_variance": None, "interrater_agreement": None}
    big_l, small_l = big_l[keep], small_l[keep]
    spread = small_l * (big_l - small_l)
    entropy = np.mean(np.minimum(small_l, big_l - small_l) / (big_l - np.ceil(big_l / 2)))
    kw = np.mean(spread / big_l**2)
    p = small_l.sum() / big_l.sum()
    if p * (1 - p) == 0:
        kappa = 1.0
    else:
        kappa = 1.0 - float(np.sum(spread / big_l)) / (p * (1 - p) * float(np.sum(big_l - 1)))
    return {"entropy": float(entropy), "kw_variance": float(kw), "interrater_agreement": kappa}


def majority_accuracy(n: int, p: float) -> float:
    """Accuracy of a majority vote of n independent members each right with probability p
    (Condorcet's jury theorem, two outcomes: right or wrong): P(more than n/2 right), plus
    half of P(exactly n/2 right) for even n (a tie decided by a fair coin)."""
    more = float(binom.sf(n // 2, n, p))  # P(X > floor(n/2))
    if n % 2 == 0:
        return more + 0.5 * float(binom.pmf(n // 2, n, p))
    return more


def condorcet(p: float, n_members: int, ensemble_accuracy: float | None) -> dict[str, Any]:
    """The Condorcet check: what independent members of the measured mean accuracy would
    reach by majority vote, beside the ensemble's actual accuracy on the same rows."""
    if n_members <= ALL_MEMBERS_UP_TO:
        sizes = list(range(1, n_members + 1))
    else:
        sizes = sorted({max(1, round(n_members * j / 50)) for j in range(1, 51)})
    return {
        "mean_member_accuracy": p,
        "n_members": n_members,
        "independent_majority_accuracy": majority_accuracy(n_members, p),
        "ensemble_accuracy": ensemble_accuracy,
        "tie_rule": "even n: a tie counts half (decided by a fair coin)",
        "by_members": [
            {"n_members": n, "independent_majority_accuracy": majority_accuracy(n, p)}
            for n in sizes
        ],
    }


def _json(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def diversity(
    correct: BoolArray,
    labels: IntArray,
    valid: BoolArray,
    n_classes: int,
    *,
    names: list[str],
    n_members_total: int,
    ensemble_accuracy: float | None,
) -> dict[str, Any]:
    """The ``metrics.diversity`` block (without ``evaluated_on``) for L >= 2 members."""
    n_members = correct.shape[0]
    matrices = pairwise_matrices(correct, labels, valid, n_classes)
    upper = np.triu_indices(n_members, k=1)
    means: dict[str, float | None] = {}
    undefined: dict[str, int] = {}
    for measure in PAIRWISE:
        values = matrices[measure][upper]
        defined = values[~np.isnan(values)]
        means[measure] = float(defined.mean()) if defined.size else None
        undefined[measure] = int(values.size - defined.size)
    cells = int(valid.sum())
    p = float((correct & valid).sum() / cells) if cells else math.nan
    out: dict[str, Any] = {
        "pairwise": means,
        "pairs": {"total": len(upper[0]), "undefined": undefined},
        "matrices": None,
        **non_pairwise(correct, valid),
        "condorcet": condorcet(p, n_members_total, ensemble_accuracy),
        "n_members": n_members,
        "n_rows": int(correct.shape[1]),
    }
    if n_members <= MAX_MATRIX_MEMBERS:
        out["matrices"] = {
            "members": names,
            **{m: [[_json(v) for v in row] for row in matrices[m].tolist()] for m in PAIRWISE},
        }
    return out


def ambiguity(
    values: FloatArray, y: FloatArray, valid: BoolArray, weights: FloatArray | None = None
) -> dict[str, Any]:
    """Krogh & Vedelsby: for f̄ = Σ w_i f_i (w normalised over the members on each row),
    (f̄ − y)² = Σ w_i (f_i − y)² − Σ w_i (f_i − f̄)², row by row; averaged over the rows:
    ensemble_mse = mean_member_mse − ambiguity, exactly."""
    w = np.ones(values.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    cell_w = valid * w[:, np.newaxis]
    total = cell_w.sum(axis=0)
    keep = total > 0
    cell_w, vals, target = cell_w[:, keep] / total[keep], values[:, keep], y[keep]
    combined = (cell_w * vals).sum(axis=0)
    member_mse = (cell_w * (vals - target) ** 2).sum(axis=0)
    spread = (cell_w * (vals - combined) ** 2).sum(axis=0)
    return {
        "ensemble_mse": float(np.mean((combined - target) ** 2)),
        "mean_member_mse": float(np.mean(member_mse)),
        "ambiguity": float(np.mean(spread)),
        "n_rows": int(keep.sum()),
    }
