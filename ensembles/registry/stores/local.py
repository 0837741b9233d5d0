"""The default artifact store: a local folder (or a shared mount) under the data folder.

``<root>/artifacts`` holds one joblib file per version, ``<root>/datasets`` one Parquet
file per dataset; every write is crash-safe (:mod:`ensembles.registry.stores.files`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ensembles.registry.base import StoredExport, StoredObject
from ensembles.registry.stores.artifacts import ArtifactFolder
from ensembles.registry.stores.datasets import DatasetFolder
from ensembles.registry.stores.files import (
    WrittenFile,
    ensure_folder,
    remove_quietly,
    stray_temp_files,
)

if TYPE_CHECKING:
    from ensembles.registry.base import ArtifactStore

log = logging.getLogger(__name__)

ORPHAN_GRACE_S: Final = 3600.0
"""How old an unreferenced file must be before it is removed as an orphan: long enough
for any upload in flight in another process (which records its row right after)."""


def _stored(written: WrittenFile) -> StoredObject:
    return StoredObject(written.sha256, written.size)


class LocalStore:
    """Artifacts and datasets under ``root``; ``owner`` tags this instance's temp files.

    ``grace_s``: how old a dataset file must be before :meth:`stored_datasets` lists it
    (another process sharing the folder may be about to commit its row).
    """

    def __init__(self, root: Path, owner: str, *, grace_s: float = ORPHAN_GRACE_S) -> None:
        self.grace_s = grace_s
        self.artifacts = ArtifactFolder(root / "artifacts", owner)
        self.datasets = DatasetFolder(root / "datasets", owner)
        for folder in (self.artifacts.root, self.datasets.root):
            ensure_folder(folder)

    @property
    def location(self) -> str:
        return str(self.artifacts.root)

    def write_artifact(self, model: str, version: int, value: object) -> StoredObject:
        return _stored(self.artifacts.write(model, version, value))

    def read_artifact(self, model: str, version: int, sha256: str, size: int) -> bytes:
        return self.artifacts.read(model, version, sha256, size)

    def load_artifact(self, model: str, version: int, sha256: str, size: int) -> object:
        return self.artifacts.load(model, version, sha256, size)

    def remove_artifact(self, model: str, version: int) -> None:
        self.artifacts.remove(model, version)

    def write_export(
        self, model: str, version: int, fmt: str, data: bytes, info: Mapping[str, str]
    ) -> StoredObject:
        sha256, size = self.artifacts.exports(model, version).write(fmt, data, info)
        return StoredObject(sha256, size)

    def read_export(self, model: str, version: int, fmt: str) -> StoredExport | None:
        return self.artifacts.exports(model, version).read(fmt)

    def stored_artifacts(self) -> Iterator[tuple[str, int]]:
        for model, version, _ in self.artifacts.stored():
            yield model, version

    def write_dataset(self, dataset_id: str, data: bytes) -> StoredObject:
        return _stored(self.datasets.write(dataset_id, data))

    def read_dataset(self, dataset_id: str, sha256: str, size: int) -> bytes:
        return self.datasets.read(dataset_id, sha256, size)

    def remove_dataset(self, dataset_id: str) -> None:
        self.datasets.remove(dataset_id)

    def stored_datasets(self) -> Iterator[str]:
        return self.datasets.stored(self.grace_s)

    def probe(self) -> None:
        self.artifacts.probe()

    def sweep(self, is_dead: Callable[[str], bool]) -> None:
        for root in (self.artifacts.root, self.datasets.root):
            for path in stray_temp_files(root, is_dead):
                log.info("removing stray temporary file %s", path)
                remove_quietly(path)


if TYPE_CHECKING:

    def _implements_the_protocol(store: LocalStore) -> ArtifactStore:
        return store  # mypy proves LocalStore structurally satisfies ArtifactStore
