"""What the registry hands out: immutable snapshots of rows, never live database objects.

Records are plain frozen dataclasses so that callers (the HTTP layer, the job runner)
can pass them between threads and processes and shape them into responses without
holding a database connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, get_args

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JOB_STATUSES: Final[tuple[str, ...]] = get_args(JobStatus)
UNFINISHED: Final = ("queued", "running")
FINISHED: Final = ("succeeded", "failed", "cancelled")

ARTIFACT_FORMAT: Final = "joblib"


@dataclass(frozen=True)
class DatasetRecord:
    """A stored table: the canonical Parquet bytes are identified by ``sha256``."""

    id: str
    name: str | None
    n_rows: int
    n_columns: int
    sha256: str
    size_bytes: int
    columns: list[dict[str, object]]
    created_at: datetime


@dataclass(frozen=True)
class VersionRecord:
    """A visible model version.

    ``metadata`` is the caller's JSON document (task, spec, metrics, ...) as stored, with
    its ``artifact`` block completed by the registry (format, sha256, size_bytes); the
    identity fields (model, version, aliases, created_at) live in the record itself.
    """

    model: str
    version: int
    created_at: datetime
    aliases: list[str]
    metadata: dict[str, object]
    artifact_sha256: str
    artifact_size: int
    artifact_format: str


@dataclass(frozen=True)
class ModelRecord:
    """A model name with at least one visible version."""

    name: str
    created_at: datetime
    latest_version: int | None
    aliases: dict[str, int]


@dataclass(frozen=True)
class AliasRecord:
    """Where an alias sends predictions.

    ``version`` is the version the alias names where one is expected (``GET
    .../versions/{alias}``, the model's ``aliases``): the heaviest of ``weights``, which
    are None for an alias on one version. ``shadow`` also gets every request's rows;
    ``shadow_epoch`` identifies this setting of it, so counts of an earlier one never mix in.
    """

    model: str
    alias: str
    version: int
    weights: dict[int, float] | None
    shadow: int | None
    shadow_epoch: str | None


@dataclass(frozen=True)
class ShadowStatsRecord:
    """A shadow's counts since it was set, summed over every process that served it."""

    model: str
    alias: str
    shadow: int
    since: datetime
    requests: int
    rows: int
    compared: int
    agreements: int
    abs_difference: float
    errors: int
    dropped: int


@dataclass(frozen=True)
class JobRecord:
    """A training job and the version number it reserved at submit time."""

    id: str
    model: str
    version: int
    status: JobStatus
    progress: dict[str, object]
    request: dict[str, object]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: dict[str, object] | None
    cancel_requested: bool


def job_problem(code: str, title: str, detail: str) -> dict[str, object]:
    """A problem object (RFC 9457 members without HTTP ones) for a job's ``error``.

    ``code`` is the stable machine-readable reason; the HTTP layer may add ``type`` and
    ``status`` from its single code table.
    """
    return {"code": code, "title": title, "detail": detail}
