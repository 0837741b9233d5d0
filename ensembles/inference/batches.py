"""Batches: several requests' checked columns answered by one engine call, and the one
prediction split back per request.

Which requests may share a call is decided by :func:`batch_key`: the same servable, the
same options, and columns of the same names and dtypes (an int64 column next to a float64
one would be promoted, and a number beyond 2**53 would change).  Every answer the
service gives is computed row by row, so a request's rows get the very same numbers
whether they were predicted alone or among others; the service's tests hold batched
answers to unbatched ones value for value.  The scheduling (who waits, for how long)
belongs to the service (``app.batching``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ensembles.inference.cells import Columns
from ensembles.inference.result import Prediction, PredictOptions

__all__ = ["batch_key", "concat_columns", "row_count", "split_prediction"]

_PER_ROW = ("predictions", "probabilities", "votes", "weighted_votes", "agreement", "std")


def row_count(columns: Columns) -> int:
    """The number of rows of checked columns (0 for a model without features)."""
    return len(next(iter(columns.values()), ()))


def batch_key(columns: Columns, options: PredictOptions) -> Hashable:
    """What requests of one servable must share to be answered by one call."""
    return (options, tuple((name, array.dtype.str) for name, array in columns.items()))


def concat_columns(parts: Sequence[Columns]) -> Columns:
    """The rows of ``parts``, one after the other (parts of one :func:`batch_key`)."""
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def split_prediction(prediction: Prediction, sizes: Sequence[int]) -> list[Prediction]:
    """One prediction per request, of ``sizes`` rows each, in the order they were joined."""
    if len(sizes) == 1:
        return [prediction]
    out = []
    start = 0
    for size in sizes:
        end = start + size
        cut = {name: _rows(getattr(prediction, name), start, end) for name in _PER_ROW}
        out.append(replace(prediction, **cut))
        start = end
    return out


def _rows(value: Any, start: int, end: int) -> Any:
    """Rows ``start:end`` of a per-row answer (a list, or an array kept C-contiguous for
    orjson); None stays None."""
    if value is None or isinstance(value, list):
        return None if value is None else value[start:end]
    return np.ascontiguousarray(value[start:end])
