"""The JSON documents the service keeps in the registry, typed once for writer and readers.

The registry stores a job's document and a version's metadata as JSON and never looks
inside; the service writes them through these models (the submit-time checks, the
worker) and reads them back through the same models (the worker, the job and version
resources), so a field cannot be written under one name and read under another.
Documents written by older code still load: fields added since have defaults, unknown
fields are kept, and :meth:`VersionMetadata.to_json` gives a loaded document back as it
was stored.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from ensembles.registry.records import JobRecord, VersionRecord
from ensembles.reports import Metrics
from ensembles.specs import EstimatorSpec, EvaluationSpec
from ensembles.tasks import Task


def _spec_json(spec: EstimatorSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", exclude_none=True)


StoredSpec = Annotated[EstimatorSpec, PlainSerializer(_spec_json)]
"""A spec stored without its empty member slots, as a user would write it."""


def _evaluation_json(evaluation: EvaluationSpec) -> dict[str, Any]:
    return evaluation.model_dump(mode="json", exclude_none=True)


StoredEvaluation = Annotated[EvaluationSpec, PlainSerializer(_evaluation_json)]
"""An evaluation stored without the options it did not ask for (documents written before
an option existed read back unchanged)."""


class _Document(BaseModel):
    model_config = ConfigDict(frozen=True)


class DatasetRef(_Document):
    """The exact table a model was trained on (it may since have been deleted)."""

    id: str
    sha256: str
    n_rows: int


class JobDocument(_Document):
    """What a training job carries from submit to worker: checked once, trained as is.

    ``random_state`` is always set (chosen at submit when the request had none), so the
    hold-out split checked at submit is the split the worker makes.
    """

    model: str
    dataset: DatasetRef
    target: str
    features: list[str]
    task: Task
    task_inferred: bool
    kind: str
    ensemble: StoredSpec
    evaluation: StoredEvaluation
    random_state: int
    description: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def of(cls, job: JobRecord) -> JobDocument:
        return cls.model_validate(job.request)

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json")


class FeatureRef(_Document):
    """A feature column of a version, in model order."""

    name: str
    dtype: str


class VersionMetadata(_Document):
    """What a version is and how it was made: written once by the worker, served by the
    version resource; ``signature`` and ``inference`` are for the prediction path.

    ``artifact`` holds the caller's extras (format, library versions); the registry adds
    the sha256 and size of the file it wrote.
    """

    model_config = ConfigDict(extra="allow")

    task: Task
    kind: str
    spec: dict[str, Any]
    dataset: DatasetRef
    target: str
    features: list[FeatureRef]
    classes: list[Any] | None
    metrics: Metrics
    feature_importances: dict[str, float] | None
    training: dict[str, Any]
    artifact: dict[str, Any]
    description: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    job_id: str | None = None
    signature: dict[str, Any] | None = None
    inference: dict[str, Any] | None = None

    @classmethod
    def of(cls, version: VersionRecord) -> VersionMetadata:
        return cls.model_validate(version.metadata)

    def to_json(self, *, exclude: set[str] | None = None) -> dict[str, Any]:
        """The stored form: only the fields that were given (a loaded document round
        trips unchanged, blocks it lacked stay absent)."""
        return self.model_dump(mode="json", exclude_unset=True, exclude=exclude)
