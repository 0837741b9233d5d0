"""The service's answers as typed pydantic models.

Every model accepts fields it does not know (``extra="allow"``): a newer server adds fields
without breaking an older client, and they stay reachable (``version.model_extra``).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ensemble_client.errors import Problem

if TYPE_CHECKING:
    import pandas as pd

Task = Literal["classification", "regression"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
FINISHED: tuple[JobStatus, ...] = ("succeeded", "failed", "cancelled")


class Answer(BaseModel):
    """Base of every answer: unknown fields are kept, not refused."""

    model_config = ConfigDict(extra="allow")


class Column(Answer):
    name: str
    dtype: str
    n_missing: int = 0
    n_unique: int = 0


class Dataset(Answer):
    """A stored table (``client.datasets.upload``)."""

    id: str
    name: str | None = None
    n_rows: int
    n_columns: int
    sha256: str
    size_bytes: int | None = None
    created_at: datetime
    columns: list[Column] = Field(default_factory=list)


class Progress(Answer):
    done: int = 0
    total: int = 0
    stage: str = ""


class Job(Answer):
    """A training job; ``version`` is the number reserved for it."""

    id: str
    status: JobStatus
    model: str
    version: int
    progress: Progress = Field(default_factory=Progress)
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: Problem | None = None
    cancel_requested: bool = False
    task: Task | None = None
    kind: str | None = None
    dataset_id: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the job has ended (succeeded, failed or cancelled)."""
        return self.status in FINISHED


class Model(Answer):
    """A model name with its latest version and aliases."""

    name: str
    latest_version: int | None = None
    aliases: dict[str, int] = Field(default_factory=dict)
    created_at: datetime | None = None


class DatasetRef(Answer):
    id: str
    sha256: str
    n_rows: int


class Feature(Answer):
    name: str
    dtype: str


class Artifact(Answer):
    format: str = "joblib"
    sha256: str
    size_bytes: int
    library_versions: dict[str, str] = Field(default_factory=dict)


class Curve(Answer):
    """A score curve: ``y`` against ``x`` (e.g. OOB accuracy against members)."""

    name: str
    x_label: str = ""
    x: list[float] = Field(default_factory=list)
    y_label: str = ""
    y: list[float | None] = Field(default_factory=list)


class Metrics(Answer):
    """A version's quality figures: each block maps a metric name to its value."""

    oob: dict[str, Any] | None = None
    holdout: dict[str, Any] | None = None
    cv: dict[str, Any] | None = None
    train: dict[str, Any] | None = None
    oof: dict[str, Any] | None = None
    estimators: list[dict[str, Any]] = Field(default_factory=list)
    curve: dict[str, Any] | None = None
    curves: list[Curve] | None = None
    notes: list[str] = Field(default_factory=list)

    def all_curves(self) -> list[Curve]:
        """Every curve: ``curves`` as the server gives them, or the older single ``curve``
        (``{"basis", "metric", "points": [{"n_estimators", "score"}]}``) in that shape."""
        if self.curves:
            return list(self.curves)
        if not self.curve or not self.curve.get("points"):
            return []
        points = self.curve["points"]
        basis = str(self.curve.get("basis", "score"))
        metric = str(self.curve.get("metric", "score"))
        return [
            Curve(
                name=f"{basis}_curve",
                x_label="members",
                x=[p.get("n_estimators", i + 1) for i, p in enumerate(points)],
                y_label=f"{basis} {metric}",
                y=[p.get("score") for p in points],
            )
        ]


class Version(Answer):
    """A trained model version: its spec, data, metrics and artifact."""

    model: str
    version: int
    aliases: list[str] = Field(default_factory=list)
    created_at: datetime
    task: Task
    kind: str
    spec: dict[str, Any] = Field(default_factory=dict)
    dataset: DatasetRef
    target: str
    features: list[Feature] = Field(default_factory=list)
    classes: list[Any] | None = None
    metrics: Metrics = Field(default_factory=Metrics)
    feature_importances: dict[str, float] | None = None
    training: dict[str, Any] = Field(default_factory=dict)
    artifact: Artifact
    description: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)


class Alias(Answer):
    """An alias: the version it names; a weighted one's ``versions`` (version -> weight)
    and its ``shadow`` where it has them."""

    model: str
    alias: str
    version: int
    versions: dict[int, float] | None = None
    shadow: int | None = None


class ShadowStats(Answer):
    """A shadow's counts since it was set: ``label_agreement`` (classification) or
    ``mean_abs_difference`` (regression), null before any row was compared."""

    model: str
    alias: str
    shadow: int
    since: datetime
    requests: int
    rows: int
    compared: int = 0
    label_agreement: float | None = None
    mean_abs_difference: float | None = None
    errors: int
    dropped: int = 0


class Explanations(Answer):
    """Why each row got its output: per row (and class), each input column's contribution;
    ``base_values`` plus a row's contributions is its output (docs/explanations.md)."""

    space: str
    method: str
    exact: bool
    features: list[str]
    base_values: float | dict[str, float]
    outputs: list[float] | list[dict[str, float]]
    contributions: list[dict[str, float]] | list[dict[str, dict[str, float]]]
    additivity_error: float

    def largest(self, row: int, top: int = 3) -> dict[str | None, list[tuple[str, float]]]:
        """Row ``row``'s ``top`` contributions by size, per class (None: regression), then
        ``(other)`` when the server summed the rest."""
        contributions = self.contributions[row]
        per_class: dict[str | None, dict[str, float]]
        if isinstance(self.base_values, dict):
            per_class = {str(k): v for k, v in contributions.items() if isinstance(v, dict)}
        else:
            per_class = {None: {k: v for k, v in contributions.items() if isinstance(v, float)}}
        return {label: _largest(values, top) for label, values in per_class.items()}


def _largest(values: dict[str, float], top: int) -> list[tuple[str, float]]:
    named = [(k, v) for k, v in values.items() if k != OTHER]
    kept = sorted(named, key=lambda kv: abs(kv[1]), reverse=True)[:top]
    return [*kept, (OTHER, values[OTHER])] if OTHER in values else kept


OTHER = "(other)"  # the sum of the contributions explain_top left out


class Prediction(Answer):
    """A prediction answer: one entry per row in every per-row list, in input order."""

    model: str
    version: int
    task: Task
    predictions: list[Any]
    classes: list[Any] | None = None
    probabilities: list[list[float]] | None = None
    votes: list[dict[str, int]] | None = None
    weighted_votes: list[dict[str, float]] | None = None
    agreement: list[float] | None = None
    std: list[float] | None = None
    explanations: Explanations | None = None
    warnings: list[str] = Field(default_factory=list)

    def to_frame(self, index: Any = None) -> pd.DataFrame:
        """The answer as a DataFrame: ``prediction``, then ``proba_<class>``,
        ``votes_<class>``, ``weighted_votes_<class>``, ``agreement`` and ``std`` as asked;
        ``attrs`` holds ``model``, ``version``, ``classes``, ``warnings`` and, when
        explained, ``explanations`` (:class:`Explanations`)."""
        from ensemble_client.tables import prediction_frame

        return prediction_frame(self, index)


class Health(Answer):
    """``/healthz`` and ``/readyz``: ``status`` and, for readiness, each check."""

    status: str
    checks: dict[str, str] = Field(default_factory=dict)


class Kind(Answer):
    kind: str
    family: str
    description: str = ""
    tasks: list[str] = Field(default_factory=list)
    estimator_slots: list[str] = Field(default_factory=list)
    params: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Catalog(Answer):
    """Every ensemble and base-learner kind, with a JSON Schema of its parameters."""

    ensemble_kinds: list[Kind] = Field(default_factory=list)
    base_kinds: list[Kind] = Field(default_factory=list)
    service_owned_params: list[str] = Field(default_factory=list)
