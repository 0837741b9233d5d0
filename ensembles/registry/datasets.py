"""Dataset ids and the one check of dataset bytes the registry makes.

The registry never parses tables (that is ``ensembles.data``); it keeps the exact bytes
it was given under a random id (see :mod:`ensembles.registry.stores`), so a model's
provenance (dataset id + sha256) stays checkable.
"""

from __future__ import annotations

import re
import secrets
from typing import Final

from ensembles.errors import NotFoundError

DATASET_ID_PATTERN: Final = r"^ds_[0-9a-f]{24}$"
PARQUET_MAGIC: Final = b"PAR1"
_DATASET_ID = re.compile(DATASET_ID_PATTERN)


def new_dataset_id() -> str:
    return f"ds_{secrets.token_hex(12)}"


def is_dataset_id(value: object) -> bool:
    return isinstance(value, str) and _DATASET_ID.fullmatch(value) is not None


def check_dataset_id(dataset_id: object) -> str:
    """Ids are ours: anything not shaped like one cannot exist (and must not reach a path)."""
    if not isinstance(dataset_id, str) or _DATASET_ID.fullmatch(dataset_id) is None:
        raise NotFoundError(f"dataset {dataset_id!r} not found")
    return dataset_id


def check_parquet(data: bytes) -> None:
    """Refuse bytes that cannot be a Parquet file (a caller bug, not user input)."""
    if len(data) < 8 or data[:4] != PARQUET_MAGIC or data[-4:] != PARQUET_MAGIC:
        raise ValueError("dataset bytes are not a Parquet file (missing PAR1 magic)")
