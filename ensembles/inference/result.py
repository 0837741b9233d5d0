"""What a prediction request asks for besides the rows, and the one result it gets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["PredictOptions", "Prediction"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class PredictOptions:
    """What a prediction request asks for besides the predictions themselves."""

    voting: Literal["hard", "soft"] | None = None
    return_proba: bool = False
    return_votes: bool = False
    return_std: bool = False


@dataclass(frozen=True, eq=False)
class Prediction:
    """Per-row answers (n entries each, in input order).

    Labels and tallies are plain JSON values; the per-row numbers stay in C-contiguous
    float64 arrays, which orjson's ``OPT_SERIALIZE_NUMPY`` writes as it writes floats,
    so a 10,000-row answer never builds a Python float per cell.
    """

    predictions: list[Any] | FloatArray  # class labels (plain JSON values) or numbers
    probabilities: FloatArray | None = None
    votes: list[dict[str, int]] | None = None  # each member once
    agreement: FloatArray | None = None
    std: FloatArray | None = None
    engine: str | None = None  # which engine computed the predictions (not in as_dict)
    # Weighted tallies, only for models whose member weights are not all 1.
    weighted_votes: list[dict[str, float | int]] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Only what was asked for, so responses stay small and fields mean 'requested'."""
        out: dict[str, Any] = {"predictions": self.predictions}
        for name in ("probabilities", "votes", "weighted_votes", "agreement", "std"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out
