"""The OOB curve's points, counted without copying the scored rows: the same figures as
the score of the scored rows' first maxima."""

from __future__ import annotations

import numpy as np
import pytest

from ensembles.metrics import first_maximum, oob_point


@pytest.mark.parametrize("k", [2, 3])
def test_first_maximum_is_argmax_ties_included(k: int) -> None:
    rng = np.random.default_rng(k)
    sums = rng.integers(0, 3, (2_000, k)).astype(np.float64)  # many ties
    np.testing.assert_array_equal(first_maximum(sums), np.argmax(sums, axis=1))


@pytest.mark.parametrize("k", [2, 4])
def test_an_oob_point_scores_the_scored_rows_only(k: int) -> None:
    rng = np.random.default_rng(0)
    n = 5_000
    sums = rng.integers(0, 5, (n, k)).astype(np.float64)
    counts = rng.integers(0, 3, n)
    codes = rng.integers(0, k, n)
    scored = counts > 0
    expected = np.mean(codes[scored] == np.argmax(sums[scored], axis=1))
    point = oob_point(7, sums, counts, codes, codes)
    assert point == {"n_estimators": 7, "score": expected, "n_scored": int(scored.sum())}
