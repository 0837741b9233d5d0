"""Datasets: stored once, immutably, verified on read; deleting one never breaks models."""

from __future__ import annotations

import hashlib

import pytest

from ensembles.errors import NotFoundError, SpecError
from ensembles.registry import SqlRegistry

from .support import COLUMNS, parquet_bytes, publish, temp_files


def test_create_get_list_read(registry: SqlRegistry) -> None:
    data = parquet_bytes(5)
    first = registry.create_dataset(name="iris", parquet=data, n_rows=5, columns=COLUMNS)
    second = registry.create_dataset(name=None, parquet=parquet_bytes(2), n_rows=2, columns=[])
    assert first.id.startswith("ds_") and len(first.id) == 27
    assert (first.name, first.n_rows, first.n_columns) == ("iris", 5, 2)
    assert first.sha256 == hashlib.sha256(data).hexdigest() and first.size_bytes == len(data)
    assert first.columns == COLUMNS
    assert registry.get_dataset(first.id) == first
    assert registry.list_datasets() == [second, first]
    assert registry.read_dataset_parquet(first.id) == data
    assert temp_files(registry.data_dir) == []


def test_datasets_named_newest_first_and_only_that_name(registry: SqlRegistry) -> None:
    older = registry.create_dataset(name="iris", parquet=parquet_bytes(5), n_rows=5, columns=[])
    registry.create_dataset(name="Iris", parquet=parquet_bytes(5), n_rows=5, columns=[])
    registry.create_dataset(name=None, parquet=parquet_bytes(5), n_rows=5, columns=[])
    newer = registry.create_dataset(name="iris", parquet=parquet_bytes(2), n_rows=2, columns=[])
    assert registry.datasets_named("iris") == [newer, older]  # exact, case and all
    assert registry.datasets_named("roses") == []


def test_delete_keeps_models_trained_on_it_loadable(registry: SqlRegistry) -> None:
    dataset = registry.create_dataset(name="d", parquet=parquet_bytes(), n_rows=3, columns=COLUMNS)
    publish(registry, "iris", value={"fitted": True}, metadata={"dataset": {"id": dataset.id}})
    registry.delete_dataset(dataset.id)
    assert not registry.store.datasets.path(dataset.id).exists()
    with pytest.raises(NotFoundError):
        registry.get_dataset(dataset.id)
    with pytest.raises(NotFoundError):
        registry.delete_dataset(dataset.id)
    assert registry.load_model("iris", 1) == {"fitted": True}
    assert registry.get_version("iris", 1).metadata["dataset"] == {"id": dataset.id}


@pytest.mark.parametrize("dataset_id", ["ds_nope", "../registry.db", "ds_" + "0" * 24])
def test_unknown_or_malformed_ids_are_not_found(registry: SqlRegistry, dataset_id: str) -> None:
    with pytest.raises(NotFoundError):
        registry.get_dataset(dataset_id)
    with pytest.raises(NotFoundError):
        registry.read_dataset_parquet(dataset_id)


def test_bad_input(registry: SqlRegistry) -> None:
    with pytest.raises(ValueError, match="Parquet"):
        registry.create_dataset(name="x", parquet=b"a,b\n1,2\n", n_rows=1, columns=[])
    with pytest.raises(SpecError):
        registry.create_dataset(name="x" * 257, parquet=parquet_bytes(), n_rows=3, columns=[])
    assert registry.list_datasets() == []
    assert list(registry.store.datasets.root.iterdir()) == []
