"""Health, readiness and the catalog."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ensembles.tasks import Task


class Health(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: Literal["ok"]


class Readiness(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "status": "ok",
                    "checks": {"database": "ok", "artifact_store": "ok", "job_runner": "ok"},
                }
            ]
        }
    )

    status: Literal["ok"]
    checks: dict[str, str] = Field(description="Each check by name: ok, or why it failed.")


class KindEntry(BaseModel):
    """One ensemble or base-learner kind."""

    model_config = ConfigDict(extra="allow")

    kind: str
    family: Literal["ensemble", "base"]
    description: str
    tasks: list[Task]
    estimator_slots: list[str] = Field(description="estimator, estimators, final_estimator.")
    supports_voting_override: bool
    top_level_only: bool = Field(
        default=False,
        description="The service's own algorithm (pasting_votes, ensemble_selection): only at "
        "the top of a spec, never a member; its artifact holds sklearn_classes.",
    )
    fixed_params: dict[str, Any]
    params: dict[str, dict[str, Any]] = Field(
        description="Per task: a JSON Schema of the parameters (types, defaults, bounds)."
    )


_FOREST_ENTRY: dict[str, Any] = {
    "kind": "random_forest",
    "family": "ensemble",
    "description": "Breiman's random forest.",
    "tasks": ["classification", "regression"],
    "estimator_slots": [],
    "supports_voting_override": True,
    "fixed_params": {},
    "params": {
        "classification": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "n_estimators": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 100}
            },
        }
    },
}


class Catalog(BaseModel):
    """Every kind a training spec may name."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "ensemble_kinds": [_FOREST_ENTRY],
                    "base_kinds": [],
                    "service_owned_params": ["n_jobs", "random_state"],
                }
            ]
        },
    )

    ensemble_kinds: list[KindEntry]
    base_kinds: list[KindEntry]
    service_owned_params: list[str] = Field(
        description="Parameters the service sets itself (random_state, n_jobs, ...)."
    )


class ProblemTypeDoc(BaseModel):
    """What a problem ``type`` of this service means."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "type": "/problems/not-found",
                    "status": 404,
                    "codes": {
                        "not_found": {
                            "title": "Not found",
                            "description": "No dataset, model, version, alias or job of that name.",
                        }
                    },
                }
            ]
        }
    )

    type: str
    status: int
    codes: dict[str, dict[str, str]] = Field(description="Error codes of this type.")
