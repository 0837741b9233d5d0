"""An additive attribution of a function's outputs to its input columns.

``base[k] + phi[i, k, :].sum() == output[i, k]`` for every row i and output k: each
method returns one, and a weighted sum of attributions (a weighted mean of members) is
again one, which is what keeps nested ensembles exact.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ensembles.errors import EnsembleError

FloatArray = NDArray[np.float64]
Method = Literal["tree_shap", "linear", "permutation"]
# What function of the encoded rows is explained: class probabilities, raw scores before a
# link, regression values, a member's one-hot label, a hard vote's weighted vote shares.
Output = Literal["proba", "margin", "value", "votes", "shares"]


class ExplanationTooSlowError(EnsembleError):
    """The explanation would run past the service's time budget."""

    code = "explain_too_slow"
    title = "Explanation over its time budget"


class ExplainUnavailableError(EnsembleError):
    """The optional library explanations need (shap) is not installed."""

    code = "explain_unavailable"
    title = "Explanations not installed"


@dataclass(frozen=True)
class Attribution:
    """``base`` (k,), ``phi`` (n, k, p) over the p encoded columns the function takes."""

    base: FloatArray
    phi: FloatArray
    method: Method

    @property
    def exact(self) -> bool:
        return self.method != "permutation"

    def outputs(self) -> FloatArray:
        summed: FloatArray = self.base[None, :] + self.phi.sum(axis=2)
        return summed


def weighted_sum(parts: Sequence[tuple[float, Attribution]]) -> Attribution:
    """Σ w·attribution: the attribution of Σ w·output.  Its method is the least exact."""
    base = sum(w * a.base for w, a in parts)
    phi = sum(w * a.phi for w, a in parts)
    method = least_exact([a.method for _, a in parts])
    return Attribution(np.asarray(base, dtype=np.float64), np.asarray(phi, np.float64), method)


def least_exact(methods: Sequence[Method]) -> Method:
    """The method a combination of parts reports: permutation if any part was sampled,
    linear if all were linear, else tree_shap (exact, through the weighted-sum rule)."""
    if "permutation" in methods:
        return "permutation"
    return "linear" if set(methods) == {"linear"} else "tree_shap"


def scattered(part: Attribution, columns: NDArray[np.intp], n_columns: int) -> Attribution:
    """A member's attribution over the column subset it saw, placed among all columns."""
    phi = np.zeros((*part.phi.shape[:2], n_columns))
    phi[:, :, columns] = part.phi
    return Attribution(part.base, phi, part.method)


def mapped(part: Attribution, matrix: FloatArray) -> Attribution:
    """The attribution of ``output @ matrix``: a linear map of the outputs keeps additivity."""
    phi = np.einsum("nkp,kj->njp", part.phi, matrix)
    return Attribution(part.base @ matrix, phi, part.method)


@dataclass(frozen=True)
class Budget:
    """What a request allows a sampling method: its seed, and the monotonic deadline."""

    seed: int = 0
    deadline: float | None = None
    reference: FloatArray | None = None  # encoded reference row (None: zeros)
    groups: NDArray[np.intp] | None = None  # input column of each encoded column

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ExplanationTooSlowError(
                "the explanation exceeded the time budget (ENSEMBLE_EXPLAIN_SECONDS): "
                "send fewer rows, or ask without explain"
            )

    def subset(self, columns: NDArray[np.intp]) -> Budget:
        """The budget of a member that sees only ``columns``."""
        reference = None if self.reference is None else self.reference[columns]
        groups = None if self.groups is None else self.groups[columns]
        return Budget(self.seed, self.deadline, reference, groups)
