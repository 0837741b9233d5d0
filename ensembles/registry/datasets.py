"""The dataset store: immutable canonical Parquet files, one per dataset id.

The registry never parses tables (that is ``ensembles.data``); it keeps the exact bytes
it was given, names them by a random id and verifies their sha256 on every read, so a
model's provenance (dataset id + sha256) stays checkable.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Final

from ensembles.errors import NotFoundError
from ensembles.registry.files import (
    WrittenFile,
    ensure_folder,
    read_verified,
    remove_quietly,
    write_bytes_atomically,
)

DATASET_ID_PATTERN: Final = r"^ds_[0-9a-f]{24}$"
PARQUET_MAGIC: Final = b"PAR1"
_DATASET_ID = re.compile(DATASET_ID_PATTERN)


def new_dataset_id() -> str:
    return f"ds_{secrets.token_hex(12)}"


def check_dataset_id(dataset_id: object) -> str:
    """Ids are ours: anything not shaped like one cannot exist (and must not reach a path)."""
    if not isinstance(dataset_id, str) or _DATASET_ID.fullmatch(dataset_id) is None:
        raise NotFoundError(f"dataset {dataset_id!r} not found")
    return dataset_id


def check_parquet(data: bytes) -> None:
    """Refuse bytes that cannot be a Parquet file (a caller bug, not user input)."""
    if len(data) < 8 or data[:4] != PARQUET_MAGIC or data[-4:] != PARQUET_MAGIC:
        raise ValueError("dataset bytes are not a Parquet file (missing PAR1 magic)")


class DatasetStore:
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
