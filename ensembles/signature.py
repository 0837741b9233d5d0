"""What a fitted model expects and returns, stored next to its artifact.

The artifact itself is a plain scikit-learn Pipeline; the signature is the small JSON
document that lets prediction check user rows (columns, types, where missing values are
allowed) and name classes without unpickling anything extra.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from ensembles.builders import NUMERIC_DTYPES, FeatureColumn
from ensembles.catalog import KINDS, Task

Voting = Literal["hard", "soft"]


@dataclass(frozen=True)
class ModelSignature:
    task: Task
    kind: str
    features: tuple[FeatureColumn, ...]
    classes: tuple[Any, ...] | None  # plain JSON values in the model's classes_ order
    voting: Voting | None  # how the model combines members by default (None: not a voting kind)

    @property
    def supports_voting_override(self) -> bool:
        return KINDS[self.kind].votes

    def accepts_missing(self, column: FeatureColumn) -> bool:
        """Missing values are fine where the pipeline handles them (imputer, encoder, HGB)."""
        return (
            column.dtype not in NUMERIC_DTYPES
            or column.has_missing
            or self.kind == "hist_gradient_boosting"
        )

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["features"] = [asdict(f) for f in self.features]
        out["classes"] = None if self.classes is None else list(self.classes)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSignature:
        return cls(
            task=data["task"],
            kind=data["kind"],
            features=tuple(FeatureColumn(**f) for f in data["features"]),
            classes=None if data["classes"] is None else tuple(data["classes"]),
            voting=data["voting"],
        )
