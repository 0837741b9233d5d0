"""The key layout of an object store: immutable, content-addressed keys under a prefix.

``<prefix>artifacts/<model>--<h>/<version>/<sha256>.joblib`` (the version's exports beside
it, ``.../<version>/exports/<sha256>.<format>``: see
:mod:`ensembles.registry.stores.exports`) and
``<prefix>datasets/<dataset id>/<sha256>.parquet``, where ``h`` is 16 hex digits of the
sha256 of the model name (as in the local store). The trailing sha256 makes every key
name exactly one content: a key is written once and never replaced, and a reader builds
it from the sha256 the registry committed, so it can only find bytes a committed row
refers to. The model and version (or dataset id) in front let deletion and the orphan
sweep work by listing one folder, without a table of keys. ``<prefix>probes/`` holds the
readiness probe's short-lived objects.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from ensembles.registry.datasets import DATASET_ID_PATTERN, check_dataset_id
from ensembles.registry.names import is_model_name, validate_model_name

_SHA256: Final = re.compile(r"^[0-9a-f]{64}$")
_DATASET_ID: Final = re.compile(DATASET_ID_PATTERN)
_SEPARATOR: Final = "--"


def _check_sha256(sha256: str) -> str:
    if _SHA256.fullmatch(sha256) is None:
        raise ValueError(f"invalid sha256 {sha256!r}")
    return sha256


def _check_version(version: int) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"invalid version number {version!r}")
    return version


class ObjectKeys:
    """Keys of artifacts, datasets and probes under ``root`` (empty or ending in ``/``)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.artifacts = f"{root}artifacts/"
        self.datasets = f"{root}datasets/"
        self.probes = f"{root}probes/"

    def model_folder(self, model: str) -> str:
        name = validate_model_name(model)  # validated again before it becomes a key
        return f"{name}{_SEPARATOR}{hashlib.sha256(name.encode()).hexdigest()[:16]}"

    def artifact_folder(self, model: str, version: int) -> str:
        return f"{self.artifacts}{self.model_folder(model)}/{_check_version(version)}/"

    def artifact(self, model: str, version: int, sha256: str) -> str:
        return f"{self.artifact_folder(model, version)}{_check_sha256(sha256)}.joblib"

    def exports_folder(self, model: str, version: int) -> str:
        """Where a version's exports live: inside its artifact folder, so removing the
        version removes them, and ``parse_artifact`` (three segments) ignores them."""
        return f"{self.artifact_folder(model, version)}exports/"

    def dataset_folder(self, dataset_id: str) -> str:
        return f"{self.datasets}{check_dataset_id(dataset_id)}/"

    def dataset(self, dataset_id: str, sha256: str) -> str:
        return f"{self.dataset_folder(dataset_id)}{_check_sha256(sha256)}.parquet"

    def parse_artifact(self, key: str) -> tuple[str, int] | None:
        """(model, version) of an artifact key of this layout, else None (ignored)."""
        parts = key.removeprefix(self.artifacts).split("/")
        if not key.startswith(self.artifacts) or len(parts) != 3:
            return None
        folder, version, leaf = parts
        name, separator, _ = folder.rpartition(_SEPARATOR)
        if not separator or not is_model_name(name) or self.model_folder(name) != folder:
            return None
        if not (version.isascii() and version.isdigit() and int(version) >= 1):
            return None
        sha256 = leaf.removesuffix(".joblib")
        if leaf == sha256 or _SHA256.fullmatch(sha256) is None:
            return None
        return name, int(version)

    def parse_dataset(self, key: str) -> str | None:
        """The dataset id of a dataset key of this layout, else None (ignored)."""
        parts = key.removeprefix(self.datasets).split("/")
        if not key.startswith(self.datasets) or len(parts) != 2:
            return None
        dataset_id, leaf = parts
        sha256 = leaf.removesuffix(".parquet")
        if _DATASET_ID.fullmatch(dataset_id) is None or _SHA256.fullmatch(sha256) is None:
            return None
        return dataset_id
