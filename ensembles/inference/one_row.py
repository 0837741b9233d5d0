"""A lone JSON record answered in one step: checked straight into the row the model reads,
then asked of the engine, skipping the layers a request of many rows needs.

Why: a one-record request of the 100-tree forest went through ~15 calls from the
record to its label (``check_rows``, its column views, the servable's checks, the
preprocessing, the row parts, the engine's general answer, the label lookups), about 35 us
of CPU around GTIL's own 18 us, a tenth of a served request (issue 24.3).  Here:

* the record is checked as :func:`~ensembles.inference.check_rows` checks one
  (:func:`record_row`): only when that check would take its fast path without a warning
  (exactly the model's columns, every cell an ``int`` or a ``float`` below 2**53 in
  magnitude, hence finite) is the row made, as one float64 row in the model's column
  order, the very values and layout the preprocessing would give the model (a
  passthrough of those columns: :attr:`Servable.passthrough`);
* the engine answers that row as it answers a request of one row (the same call), and
  a compiled engine's label comes from :meth:`CompiledModel.row_class` (its own rule,
  in Python floats, without the arrays of labels and their lookups).

Everything else (another shape, a bad or unusual cell, an extra column, options that
need the members or that the model refuses, a row too close to call) is left to the
general path by returning None: that path is the reference, and it answers as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensembles.inference.votes import label_lookup

__all__ = ["RowLane", "record_cells", "record_row", "row_lane"]

FloatArray = NDArray[np.float64]
_NUMBERS = frozenset({float, int})
_EXACT_INT = 2**53  # as rows.py: from here on an int may not survive a float64


@dataclass(frozen=True)
class RowLane:
    """What a servable's lone records need, worked out once per servable."""

    names: tuple[str, ...]  # the model's columns, in the order the model reads them
    cells: Callable[[dict[str, Any]], Any]  # a record's cells in that order (KeyError)
    # (an ``itemgetter``, so a servable pickles with its lane)
    classes: tuple[Any, ...] | None  # the JSON labels, in ``classes_`` order
    plain_positions: bool  # is each label's position in ``classes_`` its index there


def row_lane(
    names: Sequence[str],
    numbers_only: bool,
    passthrough: tuple[str, ...] | None,
    classes: Sequence[Any] | None,
    fitted_classes: Any,
) -> RowLane | None:
    """The lane of a model taking numbers only whose preprocessing passes exactly its
    columns through in their order (the row is then what the model reads), else None.

    ``classes``: the JSON labels (None: regression); ``fitted_classes``: the estimator's
    ``classes_``, whose label lookup (:func:`~ensembles.inference.votes.label_lookup`)
    must give each label its own position, for a position to stand for the label."""
    names = tuple(names)
    if not numbers_only or not names or passthrough != names:
        return None
    cells = itemgetter(*names)  # (one name: the cell itself, not a tuple of it)
    plain = False
    if classes is not None:
        lookup = label_lookup(fitted_classes)
        plain = len(lookup) == len(classes) and all(
            lookup.get(label) == i for i, label in enumerate(np.asarray(fitted_classes).tolist())
        )
    return RowLane(names, cells, None if classes is None else tuple(classes), plain)


def record_cells(lane: RowLane, instances: object, max_rows: int | None) -> tuple[Any, ...] | None:
    """The cells of ``instances`` holding one record, in the model's column order, when
    :func:`~ensembles.inference.check_rows` would check it on its fast path with no
    warning; else None (that check then decides).

    The same rule: a list of one dict with exactly the model's columns as keys (no
    extra column: no warning), every cell exactly an ``int`` or a ``float`` (never a
    bool, None or a subclass), every value below 2**53 in magnitude once a float64 (NaN
    and the infinities fail that).  Held in Python, without an array: an ``int`` below
    2**53 is a float64 exactly, so comparing the cells themselves is comparing their
    float64s; NaN and the infinities make the sum NaN or infinite (``total - total`` is
    then NaN, never 0), and an int too large for a float makes it raise, where reading
    the cells into a float64 array raised too.  (In a served request the two numpy
    reductions this replaces cost ~10 us, the rest of the request having left numpy's
    code cold: issue 24.3.)"""
    if type(instances) is not list or len(instances) != 1:
        return None
    if max_rows is not None and max_rows < 1:
        return None
    record = instances[0]
    if type(record) is not dict or len(record) != len(lane.names):
        return None
    try:
        cells = lane.cells(record)
    except KeyError:
        return None
    if len(lane.names) == 1:
        cells = (cells,)
    if not set(map(type, cells)) <= _NUMBERS:
        return None
    try:
        total = sum(cells)
    except OverflowError:
        return None
    if total - total != 0:  # NaN or an infinity among the cells
        return None
    if not (min(cells) > -_EXACT_INT and max(cells) < _EXACT_INT):
        return None
    return cells  # type: ignore[no-any-return]


def record_row(lane: RowLane, instances: object, max_rows: int | None) -> FloatArray | None:
    """The one row (shape ``(1, n)``, float64, C order) of ``instances`` holding one
    record, when :func:`record_cells` takes it (the values ``check_rows`` gets by
    reading the cells and casting them to float64); else None."""
    cells = record_cells(lane, instances, max_rows)
    if cells is None:
        return None
    return np.array(cells, dtype=np.float64).reshape(1, -1)
