"""What every training job reads again: its stored table and its labels.  The same table
and classes as before, with the per-value loops and the sort of every label gone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from ensembles import data
from ensembles.data import table_from_frame
from ensembles.errors import DataError
from ensembles.training_data import select_training_data, sorted_classes


def _slow_objects_column(name: str, s: pd.Series) -> pd.Series:
    """The per-value way, as every column of objects was read before."""
    values = [None if data.is_missing(v) else v for v in s.to_numpy(dtype=object)]
    if all(isinstance(v, str | None) for v in values):
        return pd.Series(list(values), dtype=object)
    return pd.Series(pd.array(values, dtype="boolean"))


@pytest.mark.parametrize(
    "values",
    [
        ["yes", "no", "yes"],
        [np.str_("a"), "b", "a"],
        ["x", None, "y"],
        ["x", float("nan"), "y"],
        ["x", pd.NA, "y"],
        [" padded ", "2024-01-01", ""],
    ],
)
def test_a_column_of_strings_reads_as_before(values: list[Any]) -> None:
    column = pd.Series(values, dtype=object)
    got = data._objects_column("c", column)
    expected = _slow_objects_column("c", column)
    pd.testing.assert_series_equal(got, expected)
    assert [type(v) for v in got] == [type(v) for v in expected]


def test_a_column_of_strings_only_is_not_read_value_by_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[object] = []
    missing = data.is_missing

    def counted(value: object) -> bool:
        calls.append(value)
        return missing(value)

    monkeypatch.setattr(data, "is_missing", counted)
    column = pd.Series(["yes", "no"] * 500, dtype=object)
    assert data._objects_column("target", column).tolist() == column.tolist()
    assert calls == []
    data._objects_column("target", pd.Series(["yes", None], dtype=object))
    assert len(calls) == 2  # with a missing value: the per-value way, as before


def test_mixed_types_are_still_refused_naming_the_column() -> None:
    with pytest.raises(DataError) as raised:
        data._objects_column("mixed", pd.Series(["a", 1], dtype=object))
    assert raised.value.problems[0].loc == ("columns", "mixed")


@pytest.mark.parametrize(
    "labels",
    [
        np.array(["yes", "no", "maybe", "no"], dtype=object),
        np.array([3, 1, 2, 1, 3], dtype=np.int64),
        np.array([True, False, True]),
        np.array([np.str_("b"), "a", "b"], dtype=object),
    ],
)
def test_sorted_classes_are_np_unique_s(labels: np.ndarray[Any, Any]) -> None:
    got, expected = sorted_classes(labels), np.unique(labels)
    assert got.dtype == expected.dtype
    assert got.tolist() == expected.tolist()
    assert [type(v) for v in got] == [type(v) for v in expected]


def test_the_classes_are_found_without_sorting_every_label(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes: list[int] = []
    unique = np.unique

    def recorded(values: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(values))
        return unique(values, *args, **kwargs)

    monkeypatch.setattr(np, "unique", recorded)  # the module training_data calls
    frame = pd.DataFrame({"x": np.arange(1000.0), "target": ["yes", "no", "no", "yes"] * 250})
    trained = select_training_data(table_from_frame(frame), "target", task="classification")
    assert trained.classes == ("no", "yes")
    assert sizes and max(sizes) == 2  # only the distinct labels were sorted
