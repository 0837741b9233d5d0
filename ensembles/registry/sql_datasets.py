"""Uploaded tables: their canonical Parquet in the store, their summary in a row."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Final

import sqlalchemy as sa

from ensembles.errors import NotFoundError, Problem, SpecError, StorageError
from ensembles.registry import rows
from ensembles.registry.datasets import check_dataset_id, check_parquet, new_dataset_id
from ensembles.registry.records import DatasetRecord
from ensembles.registry.schema import datasets
from ensembles.registry.transactions import SqlBase, json_copy, short_reason, utc_now

MAX_DATASET_NAME: Final = 256


class SqlDatasets(SqlBase):
    """The :class:`~ensembles.registry.base.DatasetRegistry` role on SQL."""

    def create_dataset(
        self, *, name: str | None, parquet: bytes, n_rows: int, columns: list[dict[str, object]]
    ) -> DatasetRecord:
        """Store canonical Parquet bytes immutably with their summary, under a new id."""
        if name is not None and len(name) > MAX_DATASET_NAME:
            raise SpecError(
                "dataset name too long", [Problem(("name",), f"at most {MAX_DATASET_NAME} chars")]
            )
        if n_rows < 0:
            raise ValueError("n_rows must be >= 0")
        check_parquet(parquet)
        summary = json_copy(columns, "the column summary")
        dataset_id = new_dataset_id()
        try:
            written = self.store.write_dataset(dataset_id, parquet)
        except OSError as exc:
            raise StorageError(f"could not store the dataset: {short_reason(exc)}") from exc
        record = DatasetRecord(
            id=dataset_id,
            name=name,
            n_rows=n_rows,
            n_columns=len(summary),
            sha256=written.sha256,
            size_bytes=written.size,
            columns=summary,
            created_at=utc_now(),
        )
        try:
            with self._write() as conn:
                conn.execute(sa.insert(datasets).values(**dataclasses.asdict(record)))
        except BaseException:
            self.store.remove_dataset(dataset_id)
            raise
        return record

    def get_dataset(self, dataset_id: str) -> DatasetRecord:
        check_dataset_id(dataset_id)
        with self._read() as conn:
            return rows.fetch_dataset(conn, dataset_id)

    def list_datasets(self) -> list[DatasetRecord]:
        """Every dataset, newest first."""
        query = sa.select(datasets).order_by(datasets.c.created_at.desc(), datasets.c.id)
        with self._read() as conn:
            return [rows.dataset_record(row) for row in conn.execute(query).mappings()]

    def datasets_named(self, name: str) -> list[DatasetRecord]:
        """The datasets uploaded under ``name``, newest first (none for an unnamed one)."""
        query = (
            sa.select(datasets)
            .where(datasets.c.name == name)
            .order_by(datasets.c.created_at.desc(), datasets.c.id)
        )
        with self._read() as conn:
            return [rows.dataset_record(row) for row in conn.execute(query).mappings()]

    def delete_dataset(self, dataset_id: str) -> None:
        """Forget a dataset; versions trained on it keep working (artifacts are standalone)."""
        check_dataset_id(dataset_id)
        with self._write() as conn:
            if conn.execute(sa.delete(datasets).where(datasets.c.id == dataset_id)).rowcount == 0:
                raise NotFoundError(f"dataset {dataset_id!r} not found")
        self.store.remove_dataset(dataset_id)

    def read_dataset_parquet(self, dataset_id: str, record: DatasetRecord | None = None) -> bytes:
        """The stored Parquet bytes, verified against the recorded sha256 (``record``: the
        dataset's record, when the caller has read it already)."""
        record = record or self.get_dataset(dataset_id)
        return self.store.read_dataset(dataset_id, record.sha256, record.size_bytes)


if TYPE_CHECKING:
    from ensembles.registry.base import DatasetRegistry

    def _implements_the_role(part: SqlDatasets) -> DatasetRegistry:
        return part  # mypy proves the part alone satisfies its role
