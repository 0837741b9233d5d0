"""Frozen request specs: what a user asks to train.

The shape is deliberately generic — one ``EstimatorSpec`` node type with ``kind`` and
``params`` and optional sub-estimator slots — rather than one model per kind, so that the
catalog stays the single source of truth for kinds and parameters and every semantic
problem is reported with the same path form (``ensemble.estimators[1].params.C``) by
:mod:`ensembles.validation`.  Pydantic checks only the structure here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ensembles.errors import Problem, SpecError
from ensembles.tasks import Task

MAX_RANDOM_STATE = 2**32 - 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EstimatorSpec(_Frozen):
    """One estimator of the tree: an ensemble kind with its members, or a base learner."""

    kind: str = Field(description="An ensemble or base-learner kind from GET /v1/kinds.")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters of the kind.")
    estimator: EstimatorSpec | None = Field(
        default=None, description="The member of bagging-family kinds and adaboost."
    )
    estimators: list[NamedEstimatorSpec] | None = Field(
        default=None, description="Named members of voting and stacking."
    )
    final_estimator: EstimatorSpec | None = Field(
        default=None, description="The final estimator of stacking."
    )


class NamedEstimatorSpec(EstimatorSpec):
    """A member of voting or stacking: its name appears in per-member scores."""

    name: str = Field(description="Member name, unique within its ensemble.")


class BiasVarianceSpec(_Frozen):
    """Refit on bootstrap samples to split the hold-out error into bias and variance."""

    rounds: int = Field(
        ge=2,
        description="Bootstrap refits of the ensemble and of one member (bounded by the "
        "server's ENSEMBLE_MAX_BIAS_VARIANCE_ROUNDS).",
    )


class EvaluationSpec(_Frozen):
    """How the model is measured besides its OOB estimate."""

    holdout_fraction: float = Field(
        default=0.2, ge=0.0, lt=1.0, description="Share of rows held out (stratified); 0: none."
    )
    cv_folds: int = Field(
        default=0, ge=0, le=20, description="k-fold cross-validation on the training rows; 0: none."
    )
    bias_variance: BiasVarianceSpec | None = Field(
        default=None,
        description="Bias-variance decomposition on the hold-out rows (off when absent).",
    )


class TrainingSpec(_Frozen):
    """The modelling part of a training request (the dataset is resolved by the caller)."""

    target: str
    features: list[str] | None = None
    task: Task | None = None
    ensemble: EstimatorSpec
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)
    random_state: int | None = Field(default=None, ge=0, le=MAX_RANDOM_STATE)


class SpecLimits(_Frozen):
    """Resource bounds of one request; the service takes them from its settings."""

    max_depth: int = Field(default=3, ge=1, description="Nesting levels of ensembles.")
    max_members_per_level: int = Field(default=50, ge=1, description="Named members per ensemble.")
    max_total_members: int = Field(
        default=20_000, ge=1, description="Estimators fitted in all, across nesting."
    )


def parse_estimator_spec(data: object, loc: tuple[str | int, ...] = ("ensemble",)) -> EstimatorSpec:
    """Structure check of a raw spec, raising SpecError with every problem's path."""
    try:
        return EstimatorSpec.model_validate(data)
    except ValidationError as exc:
        raise spec_error_from_pydantic(exc, loc) from None


def parse_training_spec(data: object) -> TrainingSpec:
    try:
        return TrainingSpec.model_validate(data)
    except ValidationError as exc:
        raise spec_error_from_pydantic(exc, ()) from None


def spec_error_from_pydantic(exc: ValidationError, prefix: tuple[str | int, ...]) -> SpecError:
    problems = [Problem((*prefix, *e["loc"]), e["msg"]) for e in exc.errors()]
    return SpecError(_count(problems), problems)


def _count(problems: list[Problem]) -> str:
    n = len(problems)
    return f"{n} problem{'s' if n != 1 else ''} in the request"
