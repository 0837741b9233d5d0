"""A table's per-column count of distinct values (``ColumnSummary.n_unique``, which
datasets report and a version's signature keeps) counted by sorting for numbers: the
very count of pandas' ``nunique(dropna=True)``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ensembles.data import distinct_count, table_from_frame


def _columns(seed: int) -> list[pd.Series]:
    r = np.random.default_rng(seed)
    n = int(r.integers(0, 300))
    floats = r.choice([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e300, 5e-324], n)
    mixed = np.where(r.random(n) < 0.5, r.normal(size=n), np.round(r.normal(size=n), 1))
    mixed[r.random(n) < 0.2] = np.nan
    ints = r.choice(np.array([0, -1, 7, 2**63 - 1, -(2**63)], dtype=np.int64), n)
    return [
        pd.Series(floats, dtype=np.float64),
        pd.Series(mixed, dtype=np.float64),
        pd.Series(ints, dtype=np.int64),
        pd.Series(r.integers(-5, 5, n), dtype=np.int64),
        pd.Series(np.full(n, np.nan)),
        pd.Series(r.random(n) < 0.5),
        pd.Series(r.choice(np.array(["a", "b", None], dtype=object), n)),
    ]


@pytest.mark.parametrize("seed", range(40))
def test_the_count_is_pandas_nunique(seed: int) -> None:
    for column in _columns(seed):
        assert distinct_count(column) == int(column.nunique(dropna=True))


def test_numbers_are_counted_without_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on the code before: every column's count hashed its values (pandas'
    ``nunique``).  Numbers are sorted now; strings are still hashed, the same counts."""
    frame = pd.DataFrame(
        {"x": [1.0, np.nan, -0.0, 0.0, 2.0], "k": [3, 3, 1, 2, 3], "s": ["a", "b", "a", None, "b"]}
    )
    counted: list[str] = []
    own = pd.Series.nunique

    def hashed(self: pd.Series, *args: object, **kwargs: object) -> int:
        counted.append(str(self.dtype))
        return own(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pd.Series, "nunique", hashed)
    table = table_from_frame(frame)
    assert [c.n_unique for c in table.columns] == [3, 3, 2]
    assert counted == ["object"]
