"""Models, versions and aliases."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ensembles.registry import (
    ALIAS_PATTERN,
    MAX_VERSION,
    MODEL_NAME_PATTERN,
    AliasRecord,
    ModelRecord,
    ShadowStatsRecord,
)
from ensembles.tasks import Task

MODEL_NAME = MODEL_NAME_PATTERN
ALIAS = ALIAS_PATTERN
# A version number (at most MAX_VERSION: 15 digits), ``latest`` or an alias name (``latest``
# matches the alias pattern).
VERSION_REF = r"^([1-9][0-9]{0,14}|[A-Za-z][A-Za-z0-9_-]{0,63})$"

_SHA = "9f2c4b1a0e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b"

VERSION_EXAMPLE: dict[str, Any] = {
    "model": "iris-clf",
    "version": 3,
    "aliases": ["production"],
    "created_at": "2026-11-21T12:00:03Z",
    "task": "classification",
    "kind": "random_forest",
    "spec": {"kind": "random_forest", "params": {"n_estimators": 100, "max_depth": None}},
    "dataset": {"id": "ds_7f3a2b1c0d9e8f7a6b5c4d3e", "sha256": _SHA, "n_rows": 150},
    "target": "species",
    "features": [{"name": "sepal_length", "dtype": "float64"}],
    "classes": ["setosa", "versicolor", "virginica"],
    "metrics": {
        "oob": {"accuracy": 0.953, "log_loss": 0.14, "n_scored": 150},
        "holdout": {"accuracy": 0.967, "f1_macro": 0.966, "log_loss": 0.11, "n": 30},
        "cv": None,
        "train": {"accuracy": 1.0},
        "estimators": [],
        "notes": ["no cross-validation (cv_folds = 0)"],
    },
    "feature_importances": {"petal_length": 0.44},
    "training": {"duration_s": 1.9, "n_estimators": 100, "random_state": 0},
    "artifact": {
        "format": "joblib",
        "sha256": _SHA,
        "size_bytes": 183211,
        "library_versions": {"scikit-learn": "1.9.1", "numpy": "2.4.6", "python": "3.11.7"},
    },
    "inference": {
        "engine": "treelite-gtil",
        "ok": True,
        "reason": None,
        "max_abs_diff": 0.0,
        "n_rows_checked": 2311,
        "compile_seconds": 0.004,
        "check_seconds": 0.09,
        "crossover_rows": 469,
        "versions": "treelite 4.8.1, scikit-learn 1.9.1",
    },
    "description": "first try",
    "tags": {"team": "fraud"},
    "job_id": "job_4e1f0a9b8c7d6e5f4a3b2c1d",
    "plots": ["oob_curve", "members", "confusion_matrix", "feature_importances"],
}


class ModelOut(BaseModel):
    """A model name with at least one version."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "iris-clf",
                    "latest_version": 3,
                    "aliases": {"production": 2},
                    "created_at": "2026-11-21T12:00:00Z",
                }
            ]
        }
    )

    name: str = Field(description="The model name.")
    latest_version: int | None = Field(description="The highest existing version.")
    aliases: dict[str, int] = Field(description="Alias name -> version it points at.")
    created_at: datetime = Field(description="When its first current version was made.")

    @classmethod
    def of(cls, record: ModelRecord) -> ModelOut:
        return cls(
            name=record.name,
            latest_version=record.latest_version,
            aliases=dict(record.aliases),
            created_at=record.created_at,
        )


class DatasetRef(BaseModel):
    id: str = Field(description="The dataset id trained on (it may since be deleted).")
    sha256: str = Field(description="sha256 of the exact table trained on.")
    n_rows: int = Field(description="Rows in that table.")


class FeatureOut(BaseModel):
    name: str
    dtype: Literal["int64", "float64", "bool", "string", "datetime"]


class ArtifactOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    format: str = Field(description="Always joblib: a scikit-learn Pipeline.")
    sha256: str = Field(description="sha256 (hex) of the artifact file.")
    size_bytes: int = Field(description="Size of the artifact file.")
    library_versions: dict[str, str] = Field(
        default_factory=dict, description="Versions of the libraries it was made with."
    )


class InferenceOut(BaseModel):
    """How the version is served, decided once when it was created."""

    model_config = ConfigDict(extra="allow")

    engine: str = Field(
        description="`treelite-gtil` (compiled trees, used up to `crossover_rows` rows per "
        "request, scikit-learn above) or `scikit-learn`."
    )
    ok: bool = Field(description="Whether the compiled engine passed the fidelity check.")
    reason: str | None = Field(
        default=None, description="Why scikit-learn serves the version (not compiled, or refused)."
    )
    max_abs_diff: float | None = Field(
        default=None,
        description="Largest difference from scikit-learn on the rows checked (limit 1e-9; "
        "labels must be identical); null when the answers could not be compared.",
    )
    n_rows_checked: int = Field(description="Training rows plus probe rows checked.")
    compile_seconds: float
    check_seconds: float
    crossover_rows: int | None = Field(
        default=None, description="Requests up to this many rows use the compiled engine."
    )
    versions: str | None = Field(default=None, description="Library versions that decided.")
    members: list[dict[str, str]] = Field(
        default_factory=list,
        description="Voting, stacking and bagging: each member (`name`, `kind`) and the engine "
        "that answers it (`treelite-gtil`, `numpy` or `scikit-learn`, with `reason` when "
        "scikit-learn answers a member that could have been compiled); empty for other kinds.",
    )


class VersionOut(BaseModel):
    """A trained model version: what it is, how it was trained and how well it does."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [VERSION_EXAMPLE]})

    model: str
    version: int
    aliases: list[str] = Field(description="Aliases pointing at this version.")
    created_at: datetime
    task: Task
    kind: str = Field(description="The top-level ensemble kind.")
    spec: dict[str, Any] = Field(description="The ensemble spec with every default filled in.")
    dataset: DatasetRef
    target: str
    features: list[FeatureOut] = Field(description="Feature columns, in model order.")
    classes: list[Any] | None = Field(description="Class labels (classification), in order.")
    metrics: dict[str, Any] = Field(
        description="oob, holdout, cv, train, estimators (per member) and notes."
    )
    feature_importances: dict[str, float] | None = Field(
        description="Importance per feature column, where the ensemble has them."
    )
    training: dict[str, Any] = Field(description="duration_s, n_estimators, random_state, ...")
    artifact: ArtifactOut
    inference: InferenceOut | None = Field(
        default=None, description="The serving engine and its fidelity check (newer versions)."
    )
    description: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    plots: list[str] = Field(
        default_factory=list,
        description="The plots this version has, each served at "
        "`/v1/models/{name}/versions/{ref}/plots/{plot}` (SVG, or PNG on request) and shown "
        "in its report at `/v1/models/{name}/versions/{ref}/report`.",
    )


class AliasIn(BaseModel):
    """Where an alias should point: one version, or several by weight; and a shadow."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"version": 2},
                {"versions": {"3": 0.9, "4": 0.1}},
                {"version": 3, "shadow": 4},
            ]
        },
    )

    version: int | None = Field(
        default=None, ge=1, le=MAX_VERSION, description="An existing version of the model."
    )
    versions: dict[str, float] | None = Field(
        default=None,
        description="Instead of `version`: version number -> weight (each > 0, summing to 1, "
        "at most 10 versions). Each prediction through the alias is answered by one of them, "
        "chosen by weight; with the header `X-Routing-Key`, always the same one for a key.",
    )
    shadow: int | None = Field(
        default=None,
        ge=1,
        le=MAX_VERSION,
        description="A version that also gets every prediction's rows, after the answer is "
        "sent; its answers are never returned, only compared (`GET .../shadow`).",
    )


class AliasOut(BaseModel):
    """An alias: the version it names, its weights and its shadow where it has them."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"model": "iris-clf", "alias": "production", "version": 2},
                {
                    "model": "iris-clf",
                    "alias": "production",
                    "version": 3,
                    "versions": {"3": 0.9, "4": 0.1},
                    "shadow": 5,
                },
            ]
        }
    )

    model: str
    alias: str
    version: int = Field(
        description="The version the alias names (of a weighted alias: the heaviest), as in "
        "`GET /v1/models/{name}/versions/{alias}`."
    )
    versions: dict[str, float] | None = Field(
        default=None, description="Weighted aliases: version -> weight, in version order."
    )
    shadow: int | None = Field(default=None, description="The shadow version, if any.")

    @classmethod
    def of(cls, record: AliasRecord) -> AliasOut:
        weights = record.weights
        return cls(
            model=record.model,
            alias=record.alias,
            version=record.version,
            versions=None if weights is None else {str(v): w for v, w in weights.items()},
            shadow=record.shadow,
        )


class ShadowStatsOut(BaseModel):
    """How a shadow's answers compared with the alias's, since the shadow was set."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model": "iris-clf",
                    "alias": "production",
                    "shadow": 5,
                    "since": "2026-11-25T12:00:00Z",
                    "requests": 120,
                    "rows": 480,
                    "compared": 480,
                    "label_agreement": 0.975,
                    "errors": 0,
                    "dropped": 0,
                }
            ]
        }
    )

    model: str
    alias: str
    shadow: int = Field(description="The shadow version.")
    since: datetime = Field(description="When the shadow was set (counts start there).")
    requests: int = Field(description="Requests the shadow answered or failed.")
    rows: int = Field(description="Rows of those requests.")
    compared: int = Field(description="Rows whose shadow answer was compared.")
    label_agreement: float | None = Field(
        default=None,
        description="Classification: share of compared rows where the shadow's label is the "
        "answer's (null before any row was compared).",
    )
    mean_abs_difference: float | None = Field(
        default=None,
        description="Regression: mean |shadow - answer| over the compared rows (null before any).",
    )
    errors: int = Field(description="Requests the shadow failed (its columns, its loading).")
    dropped: int = Field(
        description="Requests never given to the shadow: its queue was full "
        "(`ENSEMBLE_SHADOW_QUEUE`) or the server was stopping."
    )

    @classmethod
    def of(cls, stats: ShadowStatsRecord, task: str) -> dict[str, Any]:
        """The document: ``label_agreement`` or ``mean_abs_difference`` by ``task``."""
        compared = stats.compared
        document: dict[str, Any] = {
            "model": stats.model,
            "alias": stats.alias,
            "shadow": stats.shadow,
            "since": stats.since.isoformat().replace("+00:00", "Z"),
            "requests": stats.requests,
            "rows": stats.rows,
            "compared": compared,
        }
        if task == "classification":
            document["label_agreement"] = stats.agreements / compared if compared else None
        else:
            document["mean_abs_difference"] = stats.abs_difference / compared if compared else None
        document.update(errors=stats.errors, dropped=stats.dropped)
        return document
