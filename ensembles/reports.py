"""The quality report of a trained model, typed: what training measured, stored as is.

Training writes it, the registry stores it in the version's metadata, the version
resource serves it. The figures inside each block depend on the task (accuracy and
log loss, or r2 and rmse), so a block stays a mapping; the blocks themselves are fixed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ensembles.metrics import Scores


class Curve(BaseModel):
    """One named curve of a model (e(k) of pasting_votes, a selection curve, ...)."""

    name: str
    x_label: str
    x: list[float]
    y_label: str
    y: list[float]


class Metrics(BaseModel):
    """OOB, hold-out, cross-validation and training scores, per-member spreads, the score
    curve, and notes saying why a figure is missing.

    A report written by older code may lack a block: it loads, the block stays unset, and
    ``model_dump(exclude_unset=True)`` gives the stored document back unchanged.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    oob: Scores | None = None
    holdout: Scores | None = None
    cv: Scores | None = None
    train: Scores | None = None
    estimators: list[dict[str, Any]] = Field(default_factory=list)
    curve: dict[str, Any] | None = None
    curves: list[Curve] = Field(default_factory=list)
    # Regression: actual and predicted targets of (a bounded sample of) the evaluated
    # rows, ``{"evaluated_on", "n", "actual", "predicted"}``, for the report's plots.
    predicted_vs_actual: dict[str, Any] | None = None
    notes: list[str] = Field(default_factory=list)
    # Why the ensemble works (ensembles.science): each block None, with a note, where it
    # does not apply; their shapes are in docs/science.md.
    diversity: dict[str, Any] | None = None
    ambiguity: dict[str, Any] | None = None
    oof: dict[str, Any] | None = None
    hardest_rows: dict[str, Any] | None = None
    bias_variance: dict[str, Any] | None = None
    # ensemble_selection: {"weights": {member: count}, "member_oof": {member: score}, ...}
    selection: dict[str, Any] | None = None
    # pasting_votes: {"n_estimators", "reason", ...}: where and why its growth stopped
    stopping: dict[str, Any] | None = None
    # Mean |contribution| per input column and class on up to 1,000 hold-out rows, and the
    # reference row explanations start from (ensembles.explain.summary).
    explanations: dict[str, Any] | None = None
