"""The sampling fallback: Shapley values against the reference row estimated over random
orders of the input columns, still exactly additive.

For each order, the row's columns replace the reference's one input column at a time (the
encoded columns of one input column move together) and each column is credited with the
change of the output it causes; the changes of one order sum to output(row) minus
output(reference), so every estimate adds up.  ``PERMUTATIONS`` orders per row, each with
its reverse (antithetic pairs halve the variance of the estimate), drawn from a seed made
of the request's seed and the row's own bytes: the same row gets the same values in any
request, alone or in a batch.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensembles.explain.attribution import Attribution, Budget, FloatArray

PERMUTATIONS = 8  # orders drawn per row; with their reverses, 16 samples
_CELLS_PER_CHUNK = 4_000_000  # encoded cells evaluated at once (bounded memory)

OutputFunction = Callable[[NDArray[Any]], FloatArray]


def permutation_attribution(
    function: OutputFunction, Xt: NDArray[Any], budget: Budget
) -> Attribution:
    X = np.asarray(Xt, dtype=np.float64)
    n, p = X.shape
    reference = np.zeros(p) if budget.reference is None else budget.reference
    groups = np.arange(p) if budget.groups is None else budget.groups
    members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    base = function(reference[None, :])[0]
    phi = np.zeros((n, base.shape[0], p))
    per_row = 2 * PERMUTATIONS * (len(members) + 1)
    chunk = max(1, _CELLS_PER_CHUNK // (per_row * max(p, 1)))
    for start in range(0, n, chunk):
        budget.check()
        rows = range(start, min(n, start + chunk))
        orders = [_orders(X[i], len(members), budget.seed) for i in rows]
        Z = np.concatenate(
            [_walks(X[i], reference, members, o) for i, o in zip(rows, orders, strict=True)]
        )
        values = function(Z).reshape(len(rows), 2 * PERMUTATIONS, len(members) + 1, -1)
        steps = np.diff(values, axis=2)  # (rows, orders, step, outputs)
        for r, (i, order) in enumerate(zip(rows, orders, strict=True)):
            for s, columns in enumerate(order):
                firsts = [members[g][0] for g in columns]
                np.add.at(phi[i].T, firsts, steps[r, s] / (2 * PERMUTATIONS))
    return Attribution(np.asarray(base, dtype=np.float64), phi, "permutation")


def _orders(row: FloatArray, n_groups: int, seed: int) -> list[NDArray[np.intp]]:
    rng = np.random.default_rng([seed, zlib.crc32(row.tobytes())])
    drawn = [rng.permutation(n_groups) for _ in range(PERMUTATIONS)]
    return [order for d in drawn for order in (d, d[::-1])]


def _walks(
    row: FloatArray,
    reference: FloatArray,
    members: list[NDArray[np.intp]],
    orders: list[NDArray[np.intp]],
) -> FloatArray:
    """For each order, the reference and then each step of replacing its columns."""
    out = np.empty((len(orders), len(members) + 1, row.shape[0]))
    for o, order in enumerate(orders):
        current = reference.copy()
        out[o, 0] = current
        for step, g in enumerate(order, start=1):
            current[members[g]] = row[members[g]]
            out[o, step] = current
    return out.reshape(-1, row.shape[0])
