"""LightGBM's own single-row predictor for a compiled LightGBM model's one-row requests.

Why: a one-row request is the service's most frequent call, and GTIL's call for one row
of a 100-round LightGBM model (14-22 us, most of it GTIL's fixed cost per call) was the
largest part of its answer; LightGBM's C API keeps a predictor for single rows
(``LGBM_BoosterPredictForMatSingleRowFastInit`` / ``...SingleRowFast``) whose call with
its ctypes wrapping costs about 4.5 us (issue 22: LightGBM's one-row p50 was no better
than the 100-tree forest's; the one-row answer 39 -> 16 us in process).

Exactness: the predictor gives raw scores (``C_API_PREDICT_RAW_SCORE``), and the engine
applies its own link and label rule to them as to GTIL's, so only the raw scores could
differ.  It reads the row as it comes: the engine casts rows for GTIL only to make GTIL
read them by LightGBM's rules (``|x| <= 1e-35f`` is 0, a categorical value in (-1, 0) is
category 0), which LightGBM's predictor applies itself.  Both walk the same float64 trees
and add their leaves in tree order in float64 (LightGBM's ``PredictRaw``, GTIL's margin),
but that is an argument, not a proof: a predictor is kept only if its scores of every
row of the engine's check at load time, and of copies of some with the cells the cast
changes (:func:`input_edges`), are the bits of GTIL's scores of the cast rows
(:func:`row_predictor`); else GTIL answers every request as before.  A batch of rows and
the same rows one by one therefore get the same answers (the batcher's contract).

The predictor is LightGBM's own, on a booster of its own loaded from the estimator's
model text (the text treelite imports): LightGBM's predictors read the iteration range
from their booster at every call, which a ``predict`` of the estimator's booster on
another thread sets, so they share nothing with the estimator's booster.  One predictor
per model, its calls under a lock (LightGBM's predictor writes its row into buffers it
keeps; LightGBM 4 locks them too); its handles are freed when the predictor is
collected, that is with the compiled model that holds it.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensembles.inference.gtil import LIGHTGBM_ZERO

__all__ = ["LightGBMRow", "input_edges", "row_predictor"]

FloatArray = NDArray[np.float64]

_RAW_SCORE = 1  # C_API_PREDICT_RAW_SCORE
_FLOAT64 = 1  # C_API_DTYPE_FLOAT64


class _Library:
    """Our own handles on the LightGBM library's single-row functions (argument types
    set here, so the lightgbm package's own handle is left as it is)."""

    def __init__(self, library: Any) -> None:
        self.load = library.LGBM_BoosterLoadModelFromString
        self.load.argtypes = [
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_void_p),
        ]
        self.init = library.LGBM_BoosterPredictForMatSingleRowFastInit
        self.init.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int32,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_void_p),
        ]
        self.predict = library.LGBM_BoosterPredictForMatSingleRowFast
        self.predict.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int64),
            ctypes.c_void_p,
        ]
        self.free_config = library.LGBM_FastConfigFree
        self.free_config.argtypes = [ctypes.c_void_p]
        self.free_booster = library.LGBM_BoosterFree
        self.free_booster.argtypes = [ctypes.c_void_p]
        for function in (self.load, self.init, self.predict, self.free_config, self.free_booster):
            function.restype = ctypes.c_int
        try:  # the thread count LightGBM's calls use when theirs is not given
            self.default_threads: Any = ctypes.c_int.in_dll(library, "LGBM_DEFAULT_NUM_THREADS")
        except ValueError:  # a LightGBM without it (before 4.0)
            self.default_threads = None

    def parameters(self) -> bytes:
        """The predictor's parameters: its init sets LightGBM's process-wide default
        thread count from their ``num_threads`` (``OMP_SET_NUM_THREADS``), as every
        LightGBM call does from its own, so they say the count set now and loading a
        model leaves it as it was (a single row is predicted on the calling thread
        whatever the count)."""
        threads = 0 if self.default_threads is None else int(self.default_threads.value)
        return f"num_threads={threads}".encode() if threads > 0 else b""


@functools.cache
def _opened() -> _Library | None:
    """The library the lightgbm package loaded, opened once more (None: not found).  On
    first use: a model of another kind never imports lightgbm."""
    try:
        import lightgbm.basic
    except ImportError:
        return None
    path = getattr(getattr(lightgbm.basic, "_LIB", None), "_name", None)
    if not isinstance(path, str):
        return None
    try:
        return _Library(ctypes.CDLL(path))
    except (OSError, AttributeError):
        return None


_BYTE = ctypes.c_char


class LightGBMRow:
    """LightGBM's single-row predictor of one booster: raw scores of one float64 row."""

    def __init__(
        self, library: _Library, booster: Any, config: Any, n_features: int, n_columns: int
    ) -> None:
        self._predict = library.predict
        self._config = config
        self._n_features = n_features
        self._n_columns = n_columns
        self._length = ctypes.c_int64()  # written and read under the lock
        self._lock = threading.Lock()
        weakref.finalize(self, _free, library, config, booster)

    def scores(self, X: FloatArray) -> FloatArray | None:
        """The raw scores of ``X``, one writable C-contiguous float64 row of the model's
        width, as a (1, columns) array; None: not such a row (the predictor reads the
        model's width from its address), or LightGBM refused."""
        if X.size != self._n_features or X.dtype != np.float64:
            return None
        try:  # a ctypes view of the buffer: a third of numpy's ``X.ctypes.data``
            row = ctypes.byref(_BYTE.from_buffer(X))  # type: ignore[arg-type]  # a buffer
        except (TypeError, ValueError, BufferError):  # read-only or not contiguous
            return None
        out = np.empty((1, self._n_columns))
        with self._lock:
            status = self._predict(
                self._config,
                row,
                ctypes.byref(self._length),
                ctypes.byref(_BYTE.from_buffer(out)),  # type: ignore[arg-type]
            )
            if status != 0 or self._length.value != self._n_columns:
                return None
        return out


def _free(library: _Library, config: Any, booster: Any) -> None:
    library.free_config(config)
    library.free_booster(booster)


def row_predictor(
    estimator: Any,
    n_features: int,
    rows: FloatArray,
    expected: FloatArray,
    library: _Library | None = None,
) -> LightGBMRow | None:
    """LightGBM's single-row predictor for a fitted LightGBM estimator, if its raw scores of
    every row of ``rows`` (the preprocessed rows, uncast) are the bits of ``expected``
    (GTIL's raw scores of them cast); else None, and GTIL answers one row as it does more."""
    library = _opened() if library is None else library
    booster = getattr(estimator, "booster_", None)
    if library is None or booster is None or rows.ndim != 2 or rows.shape[1] != n_features:
        return None
    made = _made(library, booster.model_to_string(), n_features, expected.shape[1])
    if made is None:
        return None
    return made if _same_bits(made.scores, rows, expected) else None


def _made(library: _Library, text: str, n_features: int, n_columns: int) -> LightGBMRow | None:
    """A predictor of a booster loaded from ``text`` (None: LightGBM refused)."""
    booster, iterations = ctypes.c_void_p(), ctypes.c_int()
    if library.load(text.encode(), ctypes.byref(iterations), ctypes.byref(booster)) != 0:
        return None
    config = ctypes.c_void_p()
    parameters = library.parameters()
    status = library.init(
        booster, _RAW_SCORE, 0, -1, _FLOAT64, n_features, parameters, ctypes.byref(config)
    )
    if status != 0:
        library.free_booster(booster)
        return None
    return LightGBMRow(library, booster, config, n_features, n_columns)


def input_edges(X: FloatArray, categorical: tuple[int, ...]) -> FloatArray:
    """Copies of X's first rows with the cells LightGBM reads by its own rules: values at
    and around its zero threshold (``|x| <= 1e-35f`` is 0, the next float above is not),
    -0.0 and NaN (a missing cell) in every column in turn, and -0.5 in the
    ``categorical`` columns (category 0).  The engine casts these for GTIL, LightGBM's
    predictor reads them as they are."""
    base = np.asarray(X[:_EDGE_ROWS], dtype=np.float64)
    n, m = base.shape
    cycle = np.asarray(_EDGE_VALUES)[(np.arange(n)[:, None] + np.arange(m)) % len(_EDGE_VALUES)]
    edges = np.where((np.arange(n)[:, None] + np.arange(m)) % 2 == 0, cycle, base)
    if not categorical:
        return edges
    codes = base.copy()
    codes[:, list(categorical)] = -0.5
    return np.vstack([edges, codes])


_EDGE_ROWS = 32
_ABOVE_ZERO = float(np.nextafter(LIGHTGBM_ZERO, 1.0))
# NaN too: a missing cell is routed by each reader's own rule (LightGBM's missing type,
# treelite's import of it), so a model whose two readers route it apart keeps GTIL.  An
# odd count: input_edges puts them on every other cell, cycling, and an even count
# would leave half of them out.
_EDGE_VALUES = (
    1e-36, -1e-36, LIGHTGBM_ZERO, -LIGHTGBM_ZERO, _ABOVE_ZERO, -0.0, 5e-324, -5e-324, np.nan
)  # fmt: skip


def _same_bits(
    scores: Callable[[FloatArray], FloatArray | None], rows: FloatArray, expected: FloatArray
) -> bool:
    """Are ``scores`` of each row, one by one, the bits of that row of ``expected``?"""
    if rows.shape[0] == 0 or rows.shape[0] != expected.shape[0]:
        return False
    want = np.ascontiguousarray(expected, dtype=np.float64)
    for i in range(rows.shape[0]):
        got = scores(np.array(rows[i : i + 1], dtype=np.float64, order="C"))
        if got is None or got.tobytes() != want[i : i + 1].tobytes():
            return False
    return True
