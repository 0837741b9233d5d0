"""Model artifacts on a local folder: one joblib file per version, written crash-safely.

Layout: ``<root>/<model>--<h>/<version>.joblib`` where ``h`` is 16 hex digits of the
sha256 of the exact model name. The suffix keeps ``Iris`` and ``iris`` (two models for
the API) in different folders on case-insensitive file systems (macOS, Windows), where
they would otherwise overwrite each other's ``1.joblib``. A version's exports (skops,
ONNX) live in ``<version>.exports/`` beside its file
(:mod:`ensembles.registry.stores.exports`).

Loading reads the bytes once, checks their sha256 against the value recorded when the
file was written, and only then unpickles *those bytes from memory*: a file changed on
disk after writing is never unpickled.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import joblib

from ensembles.registry.names import describe, is_model_name, validate_model_name
from ensembles.registry.stores.exports import ExportFolder
from ensembles.registry.stores.files import (
    HashingWriter,
    WrittenFile,
    ensure_folder,
    probe_folder,
    read_verified,
    remove_quietly,
    write_atomically,
)

ARTIFACT_SUFFIX: Final = ".joblib"
EXPORTS_SUFFIX: Final = ".exports"  # <version>.exports/: the version's exports
_SEPARATOR: Final = "--"


class ArtifactFolder:
    """Files of model versions under ``root``; ``owner`` tags this instance's temp files."""

    def __init__(self, root: Path, owner: str) -> None:
        self.root = root
        self.owner = owner

    def folder(self, model: str) -> Path:
        """The folder of ``model``; the name is validated again before it becomes a path."""
        name = validate_model_name(model)
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        folder = self.root / f"{name}{_SEPARATOR}{digest}"
        if folder.parent != self.root:  # defence in depth: the pattern already forbids it
            raise ValueError(f"model name {model!r} escapes the artifact folder")
        return folder

    def path(self, model: str, version: int) -> Path:
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"invalid version number {version!r}")
        return self.folder(model) / f"{version}{ARTIFACT_SUFFIX}"

    def write(self, model: str, version: int, value: object) -> WrittenFile:
        """``joblib.dump`` of ``value``; complete and durable on return, absent on error."""
        destination = self.path(model, version)
        ensure_folder(destination.parent)

        def produce(writer: HashingWriter) -> None:
            joblib.dump(value, writer)

        return write_atomically(destination, self.owner, produce)

    def read(self, model: str, version: int, sha256: str, size: int) -> bytes:
        """The verified bytes of a version's file (IntegrityError names the version)."""
        return read_verified(self.path(model, version), sha256, size, describe(model, version))

    def load(self, model: str, version: int, sha256: str, size: int) -> object:
        """Unpickle a version, but only after its bytes passed the checksum."""
        data = self.read(model, version, sha256, size)
        return joblib.load(io.BytesIO(data))

    def exports(self, model: str, version: int) -> ExportFolder:
        """The version's exports, in ``<version>.exports`` beside its file."""
        folder = self.path(model, version).with_suffix(EXPORTS_SUFFIX)
        return ExportFolder(folder, self.owner, f"export of {describe(model, version)}")

    def remove(self, model: str, version: int) -> None:
        # Exports first: a crash in between leaves the file, which the orphan sweep finds.
        self.exports(model, version).remove()
        remove_quietly(self.path(model, version))

    def probe(self) -> None:
        """Raise OSError unless the store accepts a durable write."""
        ensure_folder(self.root)
        probe_folder(self.root, self.owner)

    def stored(self) -> Iterator[tuple[str, int, Path]]:
        """Every (model, version, path) found on disk, whatever the database says."""
        if not self.root.is_dir():
            return
        for folder in self.root.iterdir():
            name, separator, _ = folder.name.rpartition(_SEPARATOR)
            if not separator or not is_model_name(name) or self.folder(name) != folder:
                continue
            for path in folder.glob(f"*{ARTIFACT_SUFFIX}"):
                stem = path.name.removesuffix(ARTIFACT_SUFFIX)
                if stem.isascii() and stem.isdigit() and int(stem) >= 1:
                    yield name, int(stem), path
