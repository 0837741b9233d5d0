"""Exports of a version (skops, ONNX, ...) kept beside its artifact, content-addressed.

An export is derived from an immutable artifact, so it never changes either: it is
computed once and kept under a key ending in the sha256 of its bytes, ``<sha256>.<format>``,
next to a small JSON *sidecar* ``<sha256>.<format>.json`` holding its sha256, size and
the facts measured while making it (e.g. the ONNX fidelity), which a reader cannot cheaply
recompute. The sidecar is written first and the bytes second, both complete or absent
(local: atomic rename; object store: one PUT), so whenever a reader finds the bytes their
sidecar is there. No database row is needed: any replica finds an export by listing the
version's export folder, and the reader checks the bytes against the sha256 in their
name before handing them out.

Two replicas computing the same export at once is harmless: each writes its own complete
pair under its own sha256 (or the same one, for deterministic formats), and readers pick
the smallest sha256 among the complete pairs, so every replica serves the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Final

from ensembles.errors import IntegrityError
from ensembles.registry.base import StoredExport
from ensembles.registry.stores.files import ensure_folder, write_bytes_atomically

_FORMAT: Final = re.compile(r"^[a-z][a-z0-9]{0,15}$")
_SHA256: Final = re.compile(r"^[0-9a-f]{64}$")
SIDECAR_SUFFIX: Final = ".json"


def check_format(fmt: str) -> str:
    """The format name, which becomes part of a file name or key."""
    if _FORMAT.fullmatch(fmt) is None:
        raise ValueError(f"invalid export format {fmt!r}")
    return fmt


def leaf(sha256: str, fmt: str) -> str:
    """The file name (or last key segment) of an export's bytes."""
    return f"{sha256}.{check_format(fmt)}"


def sidecar(sha256: str, fmt: str, size: int, info: Mapping[str, str]) -> bytes:
    document = {"sha256": sha256, "size": size, "format": fmt, "info": dict(info)}
    return json.dumps(document, sort_keys=True).encode()


def chosen(leaves: Collection[str], fmt: str) -> str | None:
    """The sha256 every reader picks among the exports listed: the smallest complete one."""
    suffix = f".{check_format(fmt)}"
    shas = {name.removesuffix(suffix) for name in leaves if name.endswith(suffix)}
    complete = (
        sha for sha in shas if _SHA256.fullmatch(sha) and f"{sha}{suffix}{SIDECAR_SUFFIX}" in leaves
    )
    valid = sorted(complete)
    return valid[0] if valid else None


def verified(data: bytes, sidecar_bytes: bytes, sha256: str, what: str) -> StoredExport:
    """The export if its bytes match the sha256 of its name and its sidecar agrees."""
    try:
        document = json.loads(sidecar_bytes)
        size, info = int(document["size"]), document["info"]
        recorded = document["sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(f"the stored description of {what} is damaged") from exc
    if recorded != sha256 or len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
        raise IntegrityError(
            f"the stored {what} is damaged: its sha256 no longer matches its name; it was "
            "not served"
        )
    return StoredExport(data, sha256, {str(k): str(v) for k, v in dict(info).items()})


class ExportFolder:
    """The exports of one version in a local folder (``<version>.exports`` beside it)."""

    def __init__(self, folder: Path, owner: str, what: str) -> None:
        self.folder = folder
        self.owner = owner
        self.what = what

    def write(self, fmt: str, data: bytes, info: Mapping[str, str]) -> tuple[str, int]:
        sha256 = hashlib.sha256(data).hexdigest()
        name = leaf(sha256, fmt)
        ensure_folder(self.folder)
        for path, content in (
            (self.folder / f"{name}{SIDECAR_SUFFIX}", sidecar(sha256, fmt, len(data), info)),
            (self.folder / name, data),
        ):
            try:
                write_bytes_atomically(path, self.owner, content)
            except FileExistsError:  # the same content, written by a twin computation
                continue
        return sha256, len(data)

    def read(self, fmt: str) -> StoredExport | None:
        if not self.folder.is_dir():
            return None
        sha256 = chosen({path.name for path in self.folder.iterdir()}, fmt)
        if sha256 is None:
            return None
        name = leaf(sha256, fmt)
        try:
            data = (self.folder / name).read_bytes()
            described = (self.folder / f"{name}{SIDECAR_SUFFIX}").read_bytes()
        except FileNotFoundError as exc:  # removed with its version meanwhile
            raise IntegrityError(f"the stored {self.what} is missing") from exc
        return verified(data, described, sha256, self.what)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
