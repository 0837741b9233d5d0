"""The sigmoid link of a one-row answer, in Python floats: the bits of the rows' way
(scipy's ``expit``) for every score (issue 22: the array way cost LightGBM's one-row
answer 5 us against the forest's 0.5)."""

from __future__ import annotations

import numpy as np
import pytest

from ensembles.inference import gtil
from ensembles.inference.gtil import Plan

RS = 11


def scores() -> np.ndarray:
    """Normal and wide scores, tiny ones, random bit patterns (every exponent, NaNs,
    infinities, subnormals), and the edges where ``exp(-x)`` overflows or underflows."""
    rng = np.random.default_rng(RS)
    edges = [0.0, -0.0, 5e-324, -5e-324, np.inf, -np.inf, np.nan, 1e308, -1e308]
    for edge in (709.782712893384, 745.1332191019411, 354.891356446692, 372.5666095509705):
        for value in (edge, -edge):
            edges += [np.nextafter(value, -np.inf), value, np.nextafter(value, np.inf)]
    return np.concatenate(
        [
            rng.normal(0.0, 5.0, 100_000),
            rng.uniform(-800.0, 800.0, 50_000),
            rng.normal(0.0, 1e-8, 10_000),
            rng.integers(0, 2**64, 100_000, dtype=np.uint64).view(np.float64),
            np.asarray(edges),
        ]
    )


@pytest.mark.parametrize("name", ["expit", "expit2"])
def test_one_row_is_the_bits_of_the_rows_way(name: gtil.Link) -> None:
    plan = Plan(False, True, name, "proba")
    values = scores()
    with np.errstate(over="ignore"):  # 2 x 1e308 is infinite, as in the rows' way
        rows = gtil.link(values[:, None].copy(), plan)  # more than one row: scipy's expit
    assert rows.shape == (len(values), 2)
    for i, value in enumerate(values.tolist()):
        one = gtil.link(np.array([[value]]), plan)
        assert one.dtype == np.float64 and one.shape == (1, 2) and one.flags.c_contiguous
        assert one.tobytes() == rows[i : i + 1].tobytes(), value


def test_one_row_makes_no_scipy_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gtil, "expit", None)
    one = gtil.link(np.array([[0.25]]), Plan(False, True, "expit", "proba"))
    assert one[0, 1] == 1.0 / (1.0 + np.exp(-0.25))
