"""A training job reads a stored table as the whole read does, with its record's column
summaries instead of counting them again; whatever the footer or the record cannot vouch
for falls back to the whole read, with the same frame and the same problems."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from ensembles import data as data_module
from ensembles.catalog import Task
from ensembles.data import read_table, table_from_frame, table_to_parquet
from ensembles.errors import DataError
from ensembles.jobs import load_training_data
from ensembles.registry import Registry
from ensembles.stored_tables import read_stored_table
from ensembles.training_data import select_training_data
from tests.unit.test_submission_reads import file_bytes


def _frame(rows: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame(
        {
            "x": rng.normal(size=rows),
            "n": rng.integers(0, 5, size=rows),
            "s": rng.choice(np.array(["a", "b", None], dtype=object), size=rows),
            "flag": rng.choice([True, False], size=rows),
            "maybe": [None if i % 5 == 0 else bool(i % 2) for i in range(rows)],
            "when": pd.date_range("2024-01-01", periods=rows, tz="UTC"),
            "empty": [None] * rows,
            "gap": [1.5 if i % 7 else None for i in range(rows)],
            "holes": [i if i % 3 else None for i in range(rows)],
            "zeros": [0.0 if i % 2 else -0.0 for i in range(rows)],
            "label": np.where(rng.random(rows) > 0.5, "yes", "no"),
            "half": [None if i % 2 else "q" for i in range(rows)],
        }
    )


def _recorded(table: data_module.Table) -> list[object]:
    """The summaries as the registry gives them back: JSON."""
    loaded: list[object] = json.loads(json.dumps([c.as_dict() for c in table.columns]))
    return loaded


def _store(registry: Registry, parquet: bytes, columns: list[object] | None = None) -> str:
    table = read_table(parquet, filename="t.parquet")
    summary = _recorded(table) if columns is None else columns
    return registry.create_dataset(
        name=None,
        parquet=parquet,
        n_rows=table.n_rows,
        columns=summary,  # type: ignore[arg-type]
    ).id


def test_stored_table_is_the_whole_read() -> None:
    parquet = table_to_parquet(table_from_frame(_frame()))
    whole = read_table(parquet, filename="t.parquet")
    stored = read_stored_table(parquet, _recorded(whole))
    assert stored is not None
    assert stored.columns == whole.columns
    pd.testing.assert_frame_equal(stored.frame, whole.frame, check_exact=True)
    for name in whole.frame.columns:  # the same bits, -0.0 and NaN included
        old, new = whole.frame[name].to_numpy(), stored.frame[name].to_numpy()
        if old.dtype.kind in "fi":
            assert old.tobytes() == new.tobytes(), name


def _changed(recorded: list[object], index: int, **fields: object) -> list[object]:
    entries = [dict(e) for e in recorded]  # type: ignore[call-overload]
    entries[index].update(fields)
    return list(entries)


@pytest.mark.parametrize(
    "change",
    [
        lambda r: [],
        lambda r: r[:-1],
        lambda r: _changed(r, 0, name="y"),
        lambda r: _changed(r, 0, dtype="int64"),
        lambda r: _changed(r, 7, n_missing=0),
        lambda r: _changed(r, 0, n_unique=-1),
        lambda r: _changed(r, 0, n_unique=61),
        lambda r: _changed(r, 0, n_unique="3"),
        lambda r: [*r[1:], r[0]],
        lambda r: ["x", *r[1:]],
    ],
    ids=[
        "none",
        "one-short",
        "name",
        "dtype",
        "missing",
        "unique",
        "unique-over-rows",
        "unique-text",
        "order",
        "junk",
    ],
)
def test_a_record_the_footer_disagrees_with_is_not_trusted(change: object) -> None:
    parquet = table_to_parquet(table_from_frame(_frame()))
    recorded = _recorded(read_table(parquet, filename="t.parquet"))
    assert read_stored_table(parquet, change(recorded)) is None  # type: ignore[operator]
    assert read_stored_table(parquet, {"columns": recorded}) is None  # type: ignore[arg-type]


def test_a_file_the_footer_cannot_vouch_for_is_read_whole() -> None:
    frame = _frame()
    out = io.BytesIO()
    frame.to_parquet(out)  # pandas metadata, an index: not the canonical writer's file
    parquet = out.getvalue()
    recorded = _recorded(read_table(parquet, filename="t.parquet"))
    assert read_stored_table(parquet, recorded) is None
    infinite = table_from_frame(pd.DataFrame({"x": [1.0, 2.0], "y": ["a", "b"]}))
    infinite.frame.loc[0, "x"] = np.inf  # only a damaged store could hold one
    parquet = table_to_parquet(infinite)
    assert read_stored_table(parquet, _recorded(infinite)) is None
    with pytest.raises(DataError, match="invalid value in column 'x'"):
        read_table(parquet, filename="t.parquet")


def test_training_read_does_not_count_distinct_values_again(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails on the old code: every job's read counted every column's distinct values
    (a sort of every column) that the upload had counted and recorded."""
    dataset_id = _store(registry, table_to_parquet(table_from_frame(_frame())))

    def counted(_: pd.Series) -> int:
        raise AssertionError("distinct values counted again")

    monkeypatch.setattr(data_module, "distinct_count", counted)
    data = load_training_data(registry, dataset_id, "label", None, None)
    assert [f.name for f in data.features][:3] == ["x", "n", "s"]


CASES: list[tuple[str, list[str] | None, Task | None]] = [
    ("label", None, None),
    ("label", ["x", "s", "flag", "maybe", "zeros"], "classification"),
    ("n", ["x", "gap", "holes"], None),
    ("n", None, "regression"),
    ("holes", ["x"], "regression"),
    ("gap", None, "classification"),
    ("s", ["x"], None),
    ("nope", ["x", "lable", "x", "when", "label"], None),
    ("when", None, None),
    ("half", [], None),
]


def _outcome(read: object) -> object:
    try:
        data = read()  # type: ignore[operator]
    except DataError as exc:
        return ("error", str(exc), exc.problems)
    return (
        data.task,
        data.features,
        data.target,
        data.classes,
        data.task_inferred,
        data.y.dtype,
        data.y.tolist(),
        data.X.dtypes.tolist(),
        [data.X[c].to_numpy().tobytes() if data.X[c].dtype.kind in "fi" else None for c in data.X],
        data.X.astype(object).where(data.X.notna(), None).to_numpy().tolist(),
    )


@pytest.mark.parametrize("canonical", [True, False], ids=["canonical", "pandas-file"])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_training_data_is_the_whole_reads(
    registry: Registry, canonical: bool, case: tuple[str, list[str] | None, Task | None]
) -> None:
    """The job's training data (frame bits, labels, summaries, problems) is the one the
    whole read gives, on the stored canonical file and on a file read whole."""
    parquet = file_bytes(_frame(), canonical)
    dataset_id = _store(registry, parquet)
    target, features, task = case
    new = _outcome(lambda: load_training_data(registry, dataset_id, target, features, task))
    old = _outcome(
        lambda: select_training_data(
            read_table(parquet, filename="t.parquet"), target, features, task
        )
    )
    assert new == old
