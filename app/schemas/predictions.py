"""Prediction requests and answers."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from ensembles.tasks import Task

_SCALAR: dict[str, Any] = {"type": ["string", "number", "boolean", "null"]}
INSTANCES_SCHEMA: dict[str, Any] = {
    "description": "Rows as records (a list of objects), or columnar "
    '({"columns": [...], "data": [[...], ...]}); null is a missing value.',
    "anyOf": [
        {"type": "array", "items": {"type": "object", "additionalProperties": _SCALAR}},
        {
            "type": "object",
            "required": ["columns", "data"],
            "properties": {
                "columns": {"type": "array", "items": {"type": "string"}},
                "data": {"type": "array", "items": {"type": "array", "items": _SCALAR}},
            },
        },
    ],
}
# Checked by the library (ensembles.inference.check_rows), which names the row and column
# of every problem.
Instances = Annotated[Any, WithJsonSchema(INSTANCES_SCHEMA)]

TABLE_BODY_SCHEMA: dict[str, Any] = {
    "type": "string",
    "format": "binary",
    "description": "A table whose columns are the features (named as in training; other "
    "columns are ignored and listed in `warnings`), one row per instance; nulls are "
    "missing values. Numeric features take integer or floating columns, boolean features "
    "boolean columns, string features string (or dictionary of string) columns. Options "
    "go in the query string.",
}

PREDICT_EXAMPLE: dict[str, Any] = {
    "instances": [
        {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
    ],
    "options": {"voting": "soft", "return_proba": True, "return_votes": False},
}
COLUMNAR_EXAMPLE: dict[str, Any] = {
    "instances": {
        "columns": ["sepal_length", "sepal_width", "petal_length", "petal_width"],
        "data": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]],
    }
}


class PredictOptionsIn(BaseModel):
    """What to return besides the predictions."""

    model_config = ConfigDict(extra="forbid")

    voting: Literal["hard", "soft"] | None = Field(
        default=None,
        description="Override how members are combined (voting kinds, bagging family, forests).",
    )
    return_proba: bool = Field(default=False, description="Class probabilities per row.")
    return_votes: bool = Field(
        default=False, description="Member votes per class (and weighted tallies), agreement."
    )
    return_std: bool = Field(default=False, description="Regression: std of member predictions.")
    explain: bool = Field(
        default=False,
        description="Add `explanations`: each input column's contribution to each row's "
        "output, per class (docs/explanations.md).",
    )
    explain_top: int | None = Field(
        default=None,
        ge=1,
        description="With explain: keep the k largest contributions by absolute value per "
        "row and class, the rest summed as `(other)`.",
    )


class PredictRequest(BaseModel):
    """Rows to predict and options."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [PREDICT_EXAMPLE, COLUMNAR_EXAMPLE]}
    )

    instances: Instances = Field(description=INSTANCES_SCHEMA["description"])
    options: PredictOptionsIn = Field(default_factory=PredictOptionsIn)


class PredictionOut(BaseModel):
    """n entries in every per-row list, in input order."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model": "iris-clf",
                    "version": 3,
                    "task": "classification",
                    "predictions": ["setosa"],
                    "classes": ["setosa", "versicolor", "virginica"],
                    "probabilities": [[0.97, 0.02, 0.01]],
                    "votes": [{"setosa": 3}],
                    "agreement": [1.0],
                    "warnings": [],
                },
                {
                    "model": "iris-weighted",
                    "version": 1,
                    "task": "classification",
                    "predictions": ["versicolor"],
                    "classes": ["setosa", "versicolor", "virginica"],
                    "votes": [{"versicolor": 1, "virginica": 2}],
                    "weighted_votes": [{"versicolor": 3, "virginica": 2}],
                    "agreement": [0.6],
                    "warnings": [],
                },
            ]
        }
    )

    model: str
    version: int
    task: Task
    predictions: list[Any] = Field(description="Class labels or numbers, one per row.")
    classes: list[Any] | None = Field(default=None, description="Class order (classification).")
    probabilities: list[list[float]] | None = Field(
        default=None, description="With return_proba: per row, one per class."
    )
    votes: list[dict[str, int]] | None = Field(
        default=None,
        description="With return_votes: per row, how many members voted for each class "
        "(each member once, whatever its weight: integers summing to the number of "
        "members; classes without a vote are left out).",
    )
    weighted_votes: list[dict[str, int | float]] | None = Field(
        default=None,
        description="With return_votes, only for a model whose member weights are not all "
        "1 (otherwise it would repeat `votes`): per row, the weighted tally of each class in "
        "`votes` (the sum of the weights of the members that voted for it; integers when "
        "every weight is whole). A hard vote picks the class with the largest tally.",
    )
    agreement: list[float] | None = Field(
        default=None,
        description="With return_votes: the predicted class's share of the weighted tally "
        "(its tally divided by the sum of the weights; for an unweighted model, the share "
        "of members that voted for it).",
    )
    explanations: dict[str, Any] | None = Field(
        default=None,
        description="With explain: `space`, `method`, `exact`, `features`, `base_values`, "
        "`outputs`, `contributions` (per row, per class, per input column), "
        "`additivity_error` (docs/explanations.md).",
    )
    std: list[float] | None = Field(
        default=None, description="With return_std: population std of member predictions."
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="E.g. extra columns ignored; categories not seen in training (per column: "
        "how many rows, the first 10 rows with their values; the prediction treats them as "
        "unknown).",
    )
