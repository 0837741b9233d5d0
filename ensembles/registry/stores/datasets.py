"""Datasets on a local folder: immutable canonical Parquet files, one per dataset id.

The exact bytes are kept under the random id and verified against their sha256 on
every read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from ensembles.registry.datasets import check_dataset_id, is_dataset_id
from ensembles.registry.stores.files import (
    WrittenFile,
    ensure_folder,
    read_verified,
    remove_quietly,
    write_bytes_atomically,
)


class DatasetFolder:
    """Parquet files under ``root``; ``owner`` tags this instance's temp files."""

    def __init__(self, root: Path, owner: str) -> None:
        self.root = root
        self.owner = owner

    def path(self, dataset_id: str) -> Path:
        return self.root / f"{check_dataset_id(dataset_id)}.parquet"

    def write(self, dataset_id: str, data: bytes) -> WrittenFile:
        ensure_folder(self.root)
        return write_bytes_atomically(self.path(dataset_id), self.owner, data)

    def read(self, dataset_id: str, sha256: str, size: int) -> bytes:
        return read_verified(self.path(dataset_id), sha256, size, f"dataset {dataset_id!r}")

    def remove(self, dataset_id: str) -> None:
        remove_quietly(self.path(dataset_id))

    def stored(self, older_than_s: float) -> Iterator[str]:
        """Ids of the dataset files written more than ``older_than_s`` seconds ago."""
        if not self.root.is_dir():
            return
        cutoff = time.time() - older_than_s
        for path in self.root.glob("*.parquet"):
            dataset_id = path.name.removesuffix(".parquet")
            try:
                settled = path.stat().st_mtime <= cutoff
            except OSError:  # removed meanwhile
                continue
            if is_dataset_id(dataset_id) and settled:
                yield dataset_id
