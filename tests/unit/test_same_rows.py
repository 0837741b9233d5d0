"""``evaluation.same_rows``: whether the rows the figures score are those the fit kept
answers on, as ``np.array_equal(equal_nan=True)`` answers (the plain comparison first)."""

from __future__ import annotations

import numpy as np
import pytest

from ensembles.evaluation import same_rows

_BASE = np.asfortranarray(np.arange(24, dtype=np.float64).reshape(6, 4))


def _with(changes: dict[tuple[int, int], float], base: np.ndarray = _BASE) -> np.ndarray:
    out = base.copy(order="A")
    for at, value in changes.items():
        out[at] = value
    return out


CASES = {
    "equal": (_BASE, _BASE.copy(order="C")),
    "nan_at_the_same_cells": (_with({(1, 2): np.nan}), _with({(1, 2): np.nan})),
    "nan_at_other_cells": (_with({(1, 2): np.nan}), _with({(2, 1): np.nan})),
    "nan_against_a_number": (_with({(1, 2): np.nan}), _BASE),
    "a_number_differs": (_with({(5, 3): -1.0}), _BASE),
    "a_number_differs_beside_nan": (
        _with({(1, 2): np.nan, (5, 3): -1.0}),
        _with({(1, 2): np.nan}),
    ),
    "other_shape": (_BASE, _BASE[:5]),
}


@pytest.mark.parametrize("a,b", CASES.values(), ids=CASES.keys())
def test_same_rows_answers_as_array_equal_with_equal_nan(a: np.ndarray, b: np.ndarray) -> None:
    assert same_rows(a, b) is np.array_equal(a, b, equal_nan=True)
    assert same_rows(b, a) is np.array_equal(b, a, equal_nan=True)
