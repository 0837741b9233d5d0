"""The submit-time check reads the columns' dtypes and the target column, never the
feature values, and decides exactly what the whole read decides."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from ensembles.catalog import Task
from ensembles.data import read_table, table_from_frame, table_to_parquet
from ensembles.errors import DataError
from ensembles.jobs import load_labels, load_training_data
from ensembles.registry import Registry
from ensembles.specs import EstimatorSpec, EvaluationSpec, SpecLimits
from ensembles.stored_labels import read_labels_source
from ensembles.submission import JobRequest, check_job


def _frame(rows: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "x": rng.normal(size=rows),
            "n": rng.integers(0, 5, size=rows),
            "s": rng.choice(["a", "b", None], size=rows),
            "flag": rng.choice([True, False], size=rows),
            "when": pd.date_range("2024-01-01", periods=rows, tz="UTC"),
            "empty": [None] * rows,
            "gap": [1.5 if i % 7 else None for i in range(rows)],
            "label": np.where(rng.random(rows) > 0.5, "yes", "no"),
            "amount": rng.normal(size=rows),
            "half": [None if i % 2 else "q" for i in range(rows)],
        }
    )


def file_bytes(frame: pd.DataFrame, canonical: bool) -> bytes:
    """The frame as the upload stores it (canonical), or as pandas writes it (an index and
    pandas metadata: a file the footer cannot vouch for)."""
    if canonical:
        return table_to_parquet(table_from_frame(frame))
    out = io.BytesIO()
    frame.to_parquet(out)
    return out.getvalue()


def _store(registry: Registry, parquet: bytes) -> str:
    table = read_table(parquet, filename="t.parquet")
    columns = [c.as_dict() for c in table.columns]
    return registry.create_dataset(
        name=None, parquet=parquet, n_rows=table.n_rows, columns=columns
    ).id


def _damage_column(parquet: bytes, column: str) -> bytes:
    """The same file with one column's pages overwritten: its footer (types, statistics)
    stays readable, its values do not."""
    meta = pq.ParquetFile(io.BytesIO(parquet)).metadata
    index = meta.schema.names.index(column)
    chunk = meta.row_group(0).column(index)
    start = chunk.data_page_offset
    if chunk.has_dictionary_page:
        start = min(start, chunk.dictionary_page_offset)
    damaged = bytearray(parquet)
    damaged[start : start + chunk.total_compressed_size] = b"\xff" * chunk.total_compressed_size
    return bytes(damaged)


def test_submit_check_does_not_read_feature_values(registry: Registry) -> None:
    """Fails on the old code: the check read and decoded every column of the table."""
    parquet = table_to_parquet(table_from_frame(_frame()))
    damaged = _damage_column(parquet, "x")
    dataset_id = registry.create_dataset(name=None, parquet=damaged, n_rows=60, columns=[]).id
    with pytest.raises(DataError):  # the values really are unreadable
        load_training_data(registry, dataset_id, "label", None, None)
    request = JobRequest(
        model="m",
        target="label",
        features=["x", "n", "amount"],
        task=None,
        ensemble=EstimatorSpec(kind="random_forest", params={"n_estimators": 3}),
        evaluation=EvaluationSpec(),
        random_state=1,
    )
    record = registry.get_dataset(dataset_id)
    document, problems = check_job(registry, record, request, SpecLimits(), 10)
    assert problems == []
    assert document is not None and document.features == ["x", "n", "amount"]
    assert document.task == "classification" and document.task_inferred


CASES: list[tuple[str, list[str] | None, Task | None]] = [
    ("label", None, None),
    ("label", ["x", "s", "flag"], "classification"),
    ("n", ["x", "gap"], None),
    ("n", None, "regression"),
    ("amount", None, None),
    ("amount", ["x"], "classification"),
    ("s", ["x"], None),
    ("flag", ["n", "empty", "half"], None),
    ("when", None, None),
    ("nope", ["x", "lable", "x", "when", "label"], None),
    ("half", [], None),
    ("empty", None, None),
    ("gap", None, "classification"),
]


def _outcome(load: object, registry: Registry, dataset_id: str, case: tuple) -> object:
    target, features, task = case
    try:
        data = load(registry, dataset_id, target, features, task)  # type: ignore[operator]
    except DataError as exc:
        return ("error", str(exc), exc.problems)
    names = [f if isinstance(f, str) else f.name for f in data.features]
    return ("ok", data.task, names, data.task_inferred, data.y.dtype, data.y.tolist())


@pytest.mark.parametrize("canonical", [True, False], ids=["canonical", "pandas-file"])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_labels_decide_as_the_whole_read(
    registry: Registry, canonical: bool, case: tuple[str, list[str] | None, Task | None]
) -> None:
    """The same task, features, labels and problems as the training's own read, on the
    stored canonical file (the footer's path) and on a pandas-written one (the fallback)."""
    parquet = file_bytes(_frame(), canonical)
    assert (read_labels_source(parquet, case[0]) is not None) == canonical
    dataset_id = _store(registry, parquet)
    new = _outcome(load_labels, registry, dataset_id, case)
    old = _outcome(load_training_data, registry, dataset_id, case)
    assert new == old


def test_submit_check_does_not_summarise_the_target(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails on the old code: the check counted the target's distinct values for a
    column summary it never reads (the labels are checked from the values)."""
    from ensembles import data as data_module

    dataset_id = _store(registry, table_to_parquet(table_from_frame(_frame())))

    def counted(_: pd.Series) -> int:
        raise AssertionError("the target summarised")

    monkeypatch.setattr(data_module, "distinct_count", counted)
    labels = load_labels(registry, dataset_id, "label", None, None)
    assert labels.task == "classification" and labels.y.tolist().count("yes") > 0
