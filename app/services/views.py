"""Registry records -> API documents (versions and jobs), read through the typed documents."""

from __future__ import annotations

from app.problems import job_error_body
from app.schemas.common import ProblemDetails
from app.schemas.models import VersionOut
from app.schemas.training import JobOut, Progress
from ensembles.plots import plots_of
from ensembles.registry import JobRecord, VersionRecord
from ensembles.registry.documents import JobDocument, VersionMetadata

_PRIVATE = {"signature"}


def version_out(record: VersionRecord) -> VersionOut:
    """The stored metadata document merged with the live fields of the version."""
    metadata = VersionMetadata.of(record)
    document = metadata.to_json(exclude=_PRIVATE)
    document.update(
        model=record.model,
        version=record.version,
        aliases=list(record.aliases),
        created_at=record.created_at,
        artifact={
            **metadata.artifact,
            "format": record.artifact_format,
            "sha256": record.artifact_sha256,
            "size_bytes": record.artifact_size,
        },
    )
    document["plots"] = plots_of(document)
    return VersionOut.model_validate(document)


def job_out(job: JobRecord) -> JobOut:
    progress = job.progress
    error = job_error_body(job.error)
    document = JobDocument.of(job)
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
        task=document.task,
        kind=document.kind,
        dataset_id=document.dataset.id,
        random_state=document.random_state,
    )


def _count(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0
