"""The interfaces of the registry: the registry by role, and the store of its bytes.

Callers (the HTTP layer, the job runner, the worker) program against :class:`Registry`,
the union of its roles (datasets, jobs, versions, aliases, exports), or against the one
role they use; :class:`ensembles.registry.sql.SqlRegistry` implements it on SQLite or
PostgreSQL (opened by :func:`ensembles.registry.open_registry`) and keeps the bytes its
rows refer to in an :class:`ArtifactStore`: a local folder
(:class:`ensembles.registry.stores.LocalStore`) or an S3-compatible bucket
(:class:`ensembles.registry.stores.s3.S3Store`), without a fork of the registry. All
are structural protocols: an implementation need not inherit.

Every method is synchronous and may block on disk, network or database I/O: call it from
a worker thread, never from the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ensembles.registry.records import (
    AliasRecord,
    DatasetRecord,
    JobRecord,
    ModelRecord,
    ShadowStatsRecord,
    VersionRecord,
)
from ensembles.routing import ShadowCounts


@dataclass(frozen=True)
class StoredObject:
    """Bytes an :class:`ArtifactStore` holds durably: what the registry records of them."""

    sha256: str
    size: int


@dataclass(frozen=True)
class StoredExport:
    """An export of a version (skops, ONNX) as kept beside its artifact: its verified
    bytes, their sha256, and the facts measured when it was made (e.g. ONNX fidelity)."""

    data: bytes
    sha256: str
    info: dict[str, str]


@runtime_checkable
class ArtifactStore(Protocol):
    """Model artifacts (joblib) and dataset tables (canonical Parquet), by key.

    A write is complete and durable on return, or leaves nothing visible; it never
    replaces what is there (an object store writes immutable keys named by the sha256 it
    returns, and reads by the sha256 the registry recorded). Reads return the bytes only
    if they still match the recorded sha256 and size (``IntegrityError`` otherwise).
    ``owner`` (the registry instance id) tags work in progress, so :meth:`sweep` can
    remove what dead instances left half-written.
    """

    @property
    def location(self) -> str:
        """Where the bytes live, for operators (a folder, a bucket)."""
        ...

    def write_artifact(self, model: str, version: int, value: object) -> StoredObject: ...
    def read_artifact(self, model: str, version: int, sha256: str, size: int) -> bytes: ...
    def load_artifact(self, model: str, version: int, sha256: str, size: int) -> object:
        """Unpickle a version, only after its bytes passed the checksum."""
        ...

    def remove_artifact(self, model: str, version: int) -> None:
        """Remove a version's artifact and its exports."""
        ...

    def write_export(
        self, model: str, version: int, fmt: str, data: bytes, info: Mapping[str, str]
    ) -> StoredObject:
        """Keep an export of a version beside its artifact, under the sha256 of ``data``;
        ``info`` (facts measured while making it) is kept with it."""
        ...

    def read_export(self, model: str, version: int, fmt: str) -> StoredExport | None:
        """The version's export in ``fmt``, verified, or None if none was kept yet."""
        ...

    def stored_artifacts(self) -> Iterator[tuple[str, int]]:
        """Every (model, version) with an artifact, whatever the database says."""
        ...

    def write_dataset(self, dataset_id: str, data: bytes) -> StoredObject: ...
    def read_dataset(self, dataset_id: str, sha256: str, size: int) -> bytes: ...
    def remove_dataset(self, dataset_id: str) -> None: ...
    def stored_datasets(self) -> Iterator[str]:
        """Ids of the datasets with bytes in the store, whatever the database says, that
        were written longer ago than the store's grace period (younger ones may belong to
        an upload whose row another process is about to commit)."""
        ...

    def probe(self) -> None:
        """Raise OSError unless the store accepts a durable write."""
        ...

    def sweep(self, is_dead: Callable[[str], bool]) -> None:
        """Remove the half-written leftovers of the owners ``is_dead`` says are gone."""
        ...


@runtime_checkable
class DatasetRegistry(Protocol):
    """Uploaded tables: what the dataset routes and the training job read."""

    def create_dataset(
        self, *, name: str | None, parquet: bytes, n_rows: int, columns: list[dict[str, object]]
    ) -> DatasetRecord: ...
    def get_dataset(self, dataset_id: str) -> DatasetRecord: ...
    def list_datasets(self) -> list[DatasetRecord]: ...
    def datasets_named(self, name: str) -> list[DatasetRecord]:
        """The datasets uploaded under ``name``, newest first."""
        ...

    def delete_dataset(self, dataset_id: str) -> None: ...
    def read_dataset_parquet(
        self, dataset_id: str, record: DatasetRecord | None = None
    ) -> bytes: ...


@runtime_checkable
class JobRegistry(Protocol):
    """Training jobs, from submission to the version they publish."""

    def fail_dead_jobs(self) -> list[str]:
        """Fail the unfinished jobs of registry instances that died; their ids."""
        ...

    def submit_job(
        self, model: str, request: dict[str, object], *, max_open: int | None = None
    ) -> JobRecord: ...
    def get_job(self, job_id: str) -> JobRecord: ...
    def list_jobs(
        self, status: str | None = None, model: str | None = None, limit: int | None = None
    ) -> list[JobRecord]: ...
    def count_jobs_by_status(self) -> dict[str, int]: ...
    def start_job(self, job_id: str) -> JobRecord: ...
    def start_next_job(self, max_running: int) -> JobRecord | None: ...
    def fail_queued_jobs(self, problem: dict[str, object]) -> list[JobRecord]: ...
    def update_progress(self, job_id: str, done: int, total: int, stage: str) -> None: ...
    def request_cancel(self, job_id: str) -> JobRecord: ...
    def finish_job(
        self,
        job_id: str,
        status: Literal["failed", "cancelled"],
        error: dict[str, object] | None,
    ) -> JobRecord: ...
    def publish_version(
        self, job_id: str, model: object, metadata: dict[str, object]
    ) -> VersionRecord: ...


@runtime_checkable
class VersionRegistry(Protocol):
    """Models and their published versions: what reading and predicting need."""

    def list_models(self) -> list[ModelRecord]: ...
    def get_model(self, name: str) -> ModelRecord: ...
    def delete_model(self, name: str) -> None: ...
    def list_versions(self, name: str) -> list[VersionRecord]: ...
    def get_version(self, name: str, ref: str | int) -> VersionRecord: ...
    def resolve_version(self, name: str, ref: str | int) -> VersionRecord:
        """:meth:`get_version`, possibly answered from memory while nothing changed."""
        ...

    def resolved_version(self, name: str, ref: str | int) -> VersionRecord | None:
        """What :meth:`resolve_version` holds for ``ref`` if still current; no I/O."""
        ...

    def delete_version(self, name: str, version: int) -> None: ...
    def read_artifact(self, name: str, version: int) -> bytes: ...
    def load_model(self, name: str, version: int) -> object: ...


@runtime_checkable
class AliasRegistry(Protocol):
    """Aliases, weighted or with a shadow (rollout), and the shadow counts."""

    def set_alias(
        self,
        name: str,
        alias: str,
        version: int | None = None,
        *,
        weights: dict[int, float] | None = None,
        shadow: int | None = None,
    ) -> ModelRecord: ...
    def get_alias(self, name: str, alias: str) -> AliasRecord: ...
    def list_aliases(self, name: str) -> list[AliasRecord]: ...
    def resolve_alias(self, name: str, ref: str | int) -> AliasRecord | None:
        """The weighted or shadowed alias ``ref`` names, possibly from memory; else None."""
        ...

    def resolved_alias(self, name: str, ref: str | int) -> tuple[bool, AliasRecord | None]:
        """What :meth:`resolve_alias` holds if still current (no I/O); known first."""
        ...

    def shadow_stats(self, name: str, alias: str) -> ShadowStatsRecord: ...
    def add_shadow_counts(
        self, name: str, alias: str, epoch: str, counts: ShadowCounts
    ) -> bool: ...
    def delete_alias(self, name: str, alias: str) -> None: ...


@runtime_checkable
class ExportRegistry(Protocol):
    """Exports (skops, ONNX) of visible versions, kept beside their artifacts."""

    def read_export(self, name: str, version: int, fmt: str) -> StoredExport | None:
        """A visible version's export kept in the store, or None (not computed yet)."""
        ...

    def write_export(
        self, name: str, version: int, fmt: str, data: bytes, info: Mapping[str, str]
    ) -> StoredExport:
        """Keep an export of a visible version; what a reader will now be served."""
        ...


@runtime_checkable
class Registry(
    DatasetRegistry, JobRegistry, VersionRegistry, AliasRegistry, ExportRegistry, Protocol
):
    """Every role at once: what the service opens (:func:`ensembles.registry.open_registry`).

    Code that needs one role types against it, so a second backend or a test double
    implements only that role.
    """

    def close(self) -> None: ...
    def check(self) -> dict[str, str]: ...
