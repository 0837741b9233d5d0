"""GTIL's C prediction called with what a model's calls share worked out once.

treelite's ``_predict_impl`` asks the C library for the model's input type three times,
its output type twice and its feature count once, then the output shape (read back
through ``np.ctypeslib``), on every call: for a one-row request of a 100-tree forest that
is most of the call (issue 24, docs/performance.md).  Here those answers are read once
per model, the output shape is the one-row shape with the row count in front (checked
for 1 and 2 rows at preparation), and the C function is called directly on a handle of
the same library loaded once more, so its argument types are ours and treelite's own
calls are untouched.  Anything this does not cover (rows with fewer columns than the
model, which treelite pads; a shape that does not lead with the row count; a library
without these symbols) goes to treelite's own function: same answers, tested both ways.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["predict_cells", "predict_direct"]

FloatArray = NDArray[np.float64]
Impl = Callable[..., Any]
_TYPES: dict[str, type[np.floating[Any]]] = {"float32": np.float32, "float64": np.float64}


@dataclass(frozen=True)
class _Prepared:
    """One model's constant arguments and output layout for one configuration."""

    handle: Any
    input_dtype: Any
    input_type: bytes
    n_features: int
    output_dtype: Any
    output_tail: tuple[int, ...]  # the output shape after the row count


def _library() -> tuple[Any, Any] | None:
    """Our own handles on GTIL's two C functions (None: not this treelite)."""
    try:
        from treelite.core import _LIB
    except ImportError:
        return None
    path = getattr(_LIB, "_name", None)
    if not isinstance(path, str):
        return None
    try:
        library = ctypes.CDLL(path)
        predict = library.TreeliteGTILPredict
        shape = library.TreeliteGTILGetOutputShape
    except (OSError, AttributeError):
        return None
    predict.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    predict.restype = ctypes.c_int
    shape.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_uint64)),
        ctypes.POINTER(ctypes.c_uint64),
    ]
    shape.restype = ctypes.c_int
    return predict, shape


_C = _library()
_PREPARED: weakref.WeakKeyDictionary[Any, dict[int, _Prepared | None]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


class _Nobody:
    """What the last call's model is before any call (a class: never collected)."""


_NOBODY = weakref.ref(_Nobody)
_LAST: list[tuple[Any, Any, _Prepared | None]] = [(_NOBODY, None, None)]  # see _prepared


def _output_shape(model: Any, rows: int, config: Any) -> tuple[int, ...] | None:
    if _C is None:
        return None
    pointer = ctypes.POINTER(ctypes.c_uint64)()
    ndim = ctypes.c_uint64()
    found = _C[1](model.handle, rows, config.handle, ctypes.byref(pointer), ctypes.byref(ndim))
    if found != 0:
        return None
    return tuple(int(pointer[i]) for i in range(ndim.value))


def _prepare(model: Any, config: Any) -> _Prepared | None:
    """The constant arguments of ``model``'s calls under ``config`` (None: not covered)."""
    try:
        input_type, output_type = str(model.input_type), str(model.output_type)
        n_features = int(model.num_feature)
    except (AttributeError, ValueError, TypeError):
        return None
    if input_type not in _TYPES or output_type not in _TYPES:
        return None
    one, two = _output_shape(model, 1, config), _output_shape(model, 2, config)
    if one is None or two is None or one[:1] != (1,) or two != (2, *one[1:]):
        return None
    return _Prepared(
        model.handle,
        _TYPES[input_type],
        input_type.encode(),
        n_features,
        _TYPES[output_type],
        one[1:],
    )


def _prepared(model: Any, config: Any) -> _Prepared | None:
    last = _LAST[0]
    if last[0]() is model and last[1] is config:
        return last[2]  # the last call's model and configuration again: the common case
    try:
        by_config = _PREPARED.get(model)
    except TypeError:  # not weakly referable: never cached
        return _prepare(model, config)
    if by_config is not None and id(config) in by_config:
        prepared = by_config[id(config)]
    else:
        prepared = _prepare(model, config)
        with _LOCK:
            _PREPARED.setdefault(model, {})[id(config)] = prepared
    # Kept for the next call: it skips the weak dictionary (a lookup by a weak reference,
    # about half a microsecond of a one-row call).  A weak reference, so the model goes
    # when its version does; one tuple replaced whole, so a thread reads the old or the
    # new one, each consistent.
    _LAST[0] = (weakref.ref(model), config, prepared)
    return prepared


def _address(array: np.ndarray[Any, Any]) -> Any:
    """The address of a C-contiguous array's data, as the C function takes it: a ctypes
    view of a writable array's buffer costs a third of numpy's ``array.ctypes.data``
    (which builds a helper object per read; 2.5 us of a one-row call, twice); a read-only
    array (no writable buffer) takes numpy's way."""
    try:
        return ctypes.byref(_BYTE.from_buffer(array))  # type: ignore[arg-type]  # a buffer
    except (TypeError, ValueError, BufferError):
        return array.ctypes.data


_BYTE = ctypes.c_char


def predict_direct(model: Any, X: FloatArray, config: Any, fallback: Impl) -> Any:
    """``fallback(model, X, config=config)`` (treelite's ``_predict_impl``), answered by
    the C function directly when the model's layout allows (the same array)."""
    prepared = _prepared(model, config) if _C is not None else None
    if prepared is None or X.ndim != 2 or X.shape[1] < prepared.n_features:
        return fallback(model, X, config=config)
    data = np.asarray(X, dtype=prepared.input_dtype, order="C")
    rows = data.shape[0]
    out = np.zeros((rows, *prepared.output_tail), dtype=prepared.output_dtype)
    status = _C[0](  # type: ignore[index]
        prepared.handle,
        _address(data),
        prepared.input_type,
        rows,
        _address(out),
        config.handle,
    )
    if status != 0:
        return fallback(model, X, config=config)  # raises treelite's own error
    return out


def predict_cells(model: Any, cells: tuple[float, ...], config: Any) -> list[float] | None:
    """GTIL's output for one row given as Python numbers (``cells``, the model's width, all
    finite and within float32's range), each rounded to float32 as the engine's cast
    rounds it, as a flat list of Python floats: :func:`predict_direct`'s answer to that
    row cast by numpy (``np.asarray(cells, float64).astype(float32).astype(float64)``),
    the same values (``tests/unit/inference/test_cells_lane.py``); None where the model's
    layout is not covered (a caller then takes :func:`predict_direct`).

    Why: in a served one-row request the dozen small numpy calls around the C call (the
    row made, cast twice, the output made, viewed, reshaped and listed) cost far more
    than in a tight loop (the rest of the request leaves numpy's code and data cold):
    ~30 us of a one-row request's CPU against ~6 in a loop (issue 24.3).  The ``array``
    module's casts are C's ``(float)`` and ``(double)`` conversions, as numpy's, and
    ``array("d", ...)`` of Python ints is ``PyLong_AsDouble``, exact below 2**53 as
    numpy's."""
    prepared = _prepared(model, config) if _C is not None else None
    if (
        prepared is None
        or prepared.input_dtype is not np.float64
        or prepared.output_dtype is not np.float64
        or len(cells) != prepared.n_features
    ):
        return None
    data = array("d", array("f", cells))
    out = array("d", bytes(8 * _size(prepared.output_tail)))
    status = _C[0](  # type: ignore[index]
        prepared.handle,
        data.buffer_info()[0],
        prepared.input_type,
        1,
        out.buffer_info()[0],
        config.handle,
    )
    return None if status != 0 else out.tolist()


def _size(shape: tuple[int, ...]) -> int:
    size = 1
    for n in shape:
        size *= n
    return size
