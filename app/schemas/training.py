"""Training requests in, jobs out."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.schemas.common import ProblemDetails
from ensembles import EstimatorSpec, EvaluationSpec
from ensembles.specs import MAX_RANDOM_STATE
from ensembles.tasks import Task

TRAINING_EXAMPLE: dict[str, Any] = {
    "dataset_id": "ds_7f3a2b1c0d9e8f7a6b5c4d3e",
    "target": "species",
    "features": ["sepal_length", "sepal_width", "petal_length", "petal_width"],
    "task": "classification",
    "ensemble": {
        "kind": "voting",
        "params": {"voting": "soft", "weights": [2, 1, 1]},
        "estimators": [
            {"name": "lr", "kind": "logistic_regression", "params": {"C": 1.0}},
            {"name": "rf", "kind": "random_forest", "params": {"n_estimators": 50}},
            {"name": "nb", "kind": "gaussian_nb"},
        ],
    },
    "evaluation": {"holdout_fraction": 0.2, "cv_folds": 0},
    "random_state": 42,
    "description": "first try",
    "tags": {"team": "fraud"},
}

FOREST_EXAMPLE: dict[str, Any] = {
    "dataset_id": "ds_7f3a2b1c0d9e8f7a6b5c4d3e",
    "target": "species",
    "ensemble": {"kind": "random_forest", "params": {"n_estimators": 100}},
    "random_state": 0,
}


class TrainingRequest(BaseModel):
    """What to train: a dataset, its target, and an ensemble spec (see GET /v1/kinds)."""

    # validate_assignment: a request with problems is completed field by field, each
    # parsed by this model (see app.services.training), to check the rest against them.
    model_config = ConfigDict(
        extra="forbid",
        validate_assignment=True,
        json_schema_extra={"examples": [TRAINING_EXAMPLE, FOREST_EXAMPLE]},
    )

    dataset_id: str = Field(
        description="The dataset to train on (POST /v1/datasets): its id, or its name when "
        "unique (uploads of one name with the same content count as one table)."
    )
    target: str = Field(min_length=1, description="The column to predict.")
    features: list[str] | None = Field(
        default=None, description="Feature columns, in order; default: every column but the target."
    )
    task: Task | None = Field(
        default=None, description="Inferred from the target when absent, and reported back."
    )
    ensemble: EstimatorSpec = Field(description="The ensemble spec; kinds nest up to a bound.")
    evaluation: EvaluationSpec = Field(
        default_factory=EvaluationSpec,
        description="Hold-out share, cross-validation folds, and the optional bias-variance "
        "decomposition.",
    )
    random_state: int | None = Field(
        default=None,
        ge=0,
        le=MAX_RANDOM_STATE,
        description="Seeds every random choice; chosen by the service and recorded when absent.",
    )
    description: str | None = Field(default=None, max_length=10_000, description="Free text.")
    tags: dict[str, str] = Field(default_factory=dict, description="Free key/value labels.")


class Progress(BaseModel):
    """How far a job is: ``done`` of ``total`` units of ``stage``."""

    done: int = Field(description="Units done in this stage (e.g. trees fitted).")
    total: int = Field(description="Units in this stage (0 when unknown yet).")
    stage: str = Field(
        description="queued, starting, preprocessing, fitting, evaluating, cross_validating, "
        "measuring, bias_variance, done, failed or cancelled."
    )


JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobOut(BaseModel):
    """A training job; its ``version`` is reserved at submit time."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "job_4e1f0a9b8c7d6e5f4a3b2c1d",
                    "status": "running",
                    "model": "iris-clf",
                    "version": 3,
                    "progress": {"done": 40, "total": 100, "stage": "fitting"},
                    "created_at": "2026-11-21T12:00:00Z",
                    "started_at": "2026-11-21T12:00:01Z",
                    "finished_at": None,
                    "error": None,
                    "cancel_requested": False,
                    "task": "classification",
                    "kind": "random_forest",
                    "dataset_id": "ds_7f3a2b1c0d9e8f7a6b5c4d3e",
                    "random_state": 0,
                }
            ]
        }
    )

    id: str = Field(description="Job id, chosen by the service.")
    status: JobStatus = Field(description="queued, running, succeeded, failed or cancelled.")
    model: str = Field(description="The model name the job trains a version of.")
    version: int = Field(description="The version number reserved for this job.")
    progress: Progress
    created_at: datetime = Field(description="When it was submitted (RFC 3339, UTC).")
    started_at: datetime | None = Field(description="When a worker took it.")
    finished_at: datetime | None = Field(description="When it ended.")
    error: ProblemDetails | None = Field(description="Why a failed job failed (a problem).")
    cancel_requested: bool = Field(description="A cancel was asked for; the job stops soon.")
    task: Task | None = Field(
        default=None, description="The task, as given or inferred at submit time."
    )
    kind: str | None = Field(default=None, description="The top-level ensemble kind.")
    dataset_id: str | None = Field(default=None, description="The dataset trained on.")
    random_state: int | None = Field(default=None, description="The seed the job uses.")
