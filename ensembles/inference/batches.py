"""Batches: several requests' checked columns answered by one engine call, and the one
prediction split back per request.

Which requests may share a call: those of one servable with the same :func:`batch_key`
(the same options, and columns of the same names and dtypes: an int64 column next to a
float64 one would be promoted, and a number beyond 2**53 would change), and only where
:func:`batchable` says a row's answer cannot depend on the rows beside it.  That is so
for a compiled tree ensemble (GTIL sums each row's trees in one order) and vote tallies
(integers), and not, to the last bit, for numpy's and BLAS's sums over several rows:
joined, a soft vote's probabilities moved by up to 3e-16, linear members' by 1e-16 and a
regressor's std by 7e-15 (iris, diabetes), so those requests are answered alone.  The
scheduling (who waits, for how long) belongs to the service (``app.batching``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any

import numpy as np

from ensembles.inference.cells import Columns, MatrixColumns, MatrixRows
from ensembles.inference.compiled import CompiledModel
from ensembles.inference.result import Prediction, PredictOptions
from ensembles.inference.servable import Servable

__all__ = [
    "Part",
    "as_columns",
    "batch_key",
    "batchable",
    "concat_columns",
    "row_count",
    "split_prediction",
]

# One request's checked rows: columns, or one matrix not yet made columns (MatrixRows).
Part = Columns | MatrixRows

_DTYPE = attrgetter("dtype")
_PER_ROW = ("predictions", "probabilities", "votes", "weighted_votes", "agreement", "std")


def row_count(columns: Part) -> int:
    """The number of rows of checked columns (0 for a model without features)."""
    if isinstance(columns, MatrixRows):
        return int(columns.matrix.shape[0])
    return len(next(iter(columns.values()), ()))


def as_columns(part: Part) -> Columns:
    """A request's checked columns (those of its matrix, for :class:`MatrixRows`)."""
    return part.columns() if isinstance(part, MatrixRows) else part


def batchable(servable: Servable, n_rows: int, options: PredictOptions) -> bool:
    """Are a request's answers the same, to the bit, whatever rows share its call?  Yes
    when the compiled engine of a tree ensemble answers it (the batch keeps that engine:
    see :meth:`Servable.engine_for`), asking the members for nothing but their votes."""
    if options.voting is not None or options.return_std:
        return False  # averaged over the members by numpy: sums across the batch's shape
    return isinstance(servable.engine_for(n_rows), CompiledModel)


def batch_key(columns: Part, options: PredictOptions) -> Hashable:
    """What requests of one servable must share to be answered by one call (names and
    dtypes read in C: a Python step per column cost a one-row request 8 us).  The
    columns of one matrix (:class:`MatrixColumns`, :class:`MatrixRows`) give the same key
    from the names and the matrix's dtype, without a pass over the columns."""
    if isinstance(columns, MatrixRows):
        return (options, columns.names, (columns.matrix.dtype,) * len(columns.names))
    if type(columns) is MatrixColumns:
        names, matrix = columns.names, columns.matrix
        if names is not None and matrix is not None:
            return (options, names, (matrix.dtype,) * len(names))
    return (options, tuple(columns), tuple(map(_DTYPE, columns.values())))


def concat_columns(parts: Sequence[Part]) -> Columns:
    """The rows of ``parts``, one after the other (parts of one :func:`batch_key`): the
    tables of records read into one table each (:class:`MatrixColumns`, or
    :class:`MatrixRows`) joined in one call, which a model taking those columns copies
    as it is (a column at a time, a batch of one-row requests of 30 columns took 30
    concatenations, then a stacking)."""
    if len(parts) == 1:
        return as_columns(parts[0])
    tables = _tables(parts)
    if tables is not None:
        return MatrixColumns(tables[0], np.concatenate(tables[1]))
    columns = [as_columns(part) for part in parts]
    return {name: np.concatenate([part[name] for part in columns]) for name in columns[0]}


def _tables(parts: Sequence[Part]) -> tuple[tuple[str, ...], list[Any]] | None:
    """The names and the tables of ``parts`` when each is a whole table of those names."""
    names = _matrix_of(parts[0])[0]
    if names is None:
        return None
    tables = []
    for part in parts:
        own, matrix = _matrix_of(part)
        if own != names or matrix is None:
            return None
        tables.append(matrix)
    return names, tables


def _matrix_of(part: Part) -> tuple[tuple[str, ...] | None, Any]:
    """The names and the matrix of a part that is one table (else None, None)."""
    if isinstance(part, MatrixRows) or type(part) is MatrixColumns:
        return part.names, part.matrix
    return None, None


def split_prediction(prediction: Prediction, sizes: Sequence[int]) -> list[Prediction]:
    """One prediction per request, of ``sizes`` rows each, in the order they were joined."""
    if len(sizes) == 1:
        return [prediction]
    # What each part keeps as it is, and the per-row answers it was asked for, looked up
    # once, and each part made without the frozen dataclass's ``__init__`` (see _made):
    # ``dataclasses.replace`` per part cost a one-row part about 7 us, now under 3, most
    # of it the seven ``object.__setattr__`` calls (benchmarks/batch_split_cost.py).
    kept = {f.name: getattr(prediction, f.name) for f in fields(prediction)}
    given = [(name, kept[name]) for name in _PER_ROW if kept[name] is not None]
    out = []
    start = 0
    for size in sizes:
        end = start + size
        part = dict(kept)
        for name, value in given:
            part[name] = _rows(value, start, end)
        out.append(_made(part))
        start = end
    return out


def _made(values: dict[str, Any]) -> Prediction:
    """The :class:`Prediction` of these field values (every field given), as its
    ``__init__`` would make it: a plain frozen dataclass with no ``__post_init__``, slots
    or defaults computed (``_MADE_PLAINLY`` checks it once), so its fields are its
    instance dict."""
    if not _MADE_PLAINLY:
        return Prediction(**values)
    made = object.__new__(Prediction)
    made.__dict__.update(values)
    return made


def _plain(cls: type) -> bool:
    """Is a ``cls`` made by setting its fields in its instance dict, and nothing else?"""
    return (
        hasattr(cls, "__dataclass_fields__")
        and not hasattr(cls, "__post_init__")
        and not hasattr(cls, "__slots__")
        and all(f.init for f in fields(cls))
    )


_MADE_PLAINLY = _plain(Prediction)


def _rows(value: Any, start: int, end: int) -> Any:
    """Rows ``start:end`` of a per-row answer (a list, or an array kept C-contiguous for
    orjson); None stays None."""
    if value is None or isinstance(value, list):
        return None if value is None else value[start:end]
    return np.ascontiguousarray(value[start:end])
