"""Registry records -> API documents (versions and jobs)."""

from __future__ import annotations

from typing import Any

from app.jobs import job_view
from app.problems import job_error_body
from app.schemas.common import ProblemDetails
from app.schemas.models import VersionOut
from app.schemas.training import JobOut, Progress
from ensembles.registry import JobRecord, VersionRecord

_PRIVATE = frozenset({"signature"})


def version_out(record: VersionRecord) -> VersionOut:
    """The stored metadata document merged with the live fields of the version."""
    document: dict[str, Any] = {k: v for k, v in record.metadata.items() if k not in _PRIVATE}
    artifact = dict(document.get("artifact") or {})
    artifact.update(
        format=record.artifact_format,
        sha256=record.artifact_sha256,
        size_bytes=record.artifact_size,
    )
    document.update(
        model=record.model,
        version=record.version,
        aliases=list(record.aliases),
        created_at=record.created_at,
        artifact=artifact,
    )
    return VersionOut.model_validate(document)


def job_out(job: JobRecord) -> JobOut:
    progress = job.progress
    error = job_error_body(job.error)
    return JobOut(
        id=job.id,
        status=job.status,
        model=job.model,
        version=job.version,
        progress=Progress(
            done=_count(progress.get("done")),
            total=_count(progress.get("total")),
            stage=str(progress.get("stage") or job.status),
        ),
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        error=None if error is None else ProblemDetails.model_validate(error),
        cancel_requested=job.cancel_requested,
        **job_view(job),
    )


def _count(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0
