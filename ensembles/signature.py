"""What a fitted model expects and returns, stored next to its artifact.

The artifact itself is a plain scikit-learn Pipeline; the signature is the small JSON
document that lets prediction check user rows (columns, types, where missing values are
allowed, which categories training saw) and name classes without unpickling anything extra.

``categories`` came later than the other fields: a signature stored before it has none
(``None``: unknown), and its versions predict as before, without unseen-category warnings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, Literal

from ensembles.builders import NUMERIC_DTYPES, FeatureColumn
from ensembles.catalog import KINDS
from ensembles.tasks import Task

Voting = Literal["hard", "soft"]


@dataclass(frozen=True)
class ModelSignature:
    task: Task
    kind: str
    features: tuple[FeatureColumn, ...]
    classes: tuple[Any, ...] | None  # plain JSON values in the model's classes_ order
    voting: Voting | None  # how the model combines members by default (None: not a voting kind)
    # The categories each encoded (string or boolean) column had in training, as plain JSON
    # values without the missing value; None when not recorded (versions stored before).
    # Not hashed: a dict is not hashable, and a signature is never a key.
    categories: Mapping[str, tuple[Any, ...]] | None = field(default=None, hash=False)

    @cached_property
    def category_sets(self) -> dict[str, frozenset[Any]]:
        """``categories`` as sets, built once per signature (a served version's is parsed
        once and cached), so checking a column costs one hash per cell, whatever the
        number of categories."""
        return {name: frozenset(known) for name, known in (self.categories or {}).items()}

    @cached_property
    def feature_names(self) -> tuple[str, ...]:
        """The features' names in order, built once: every prediction reads them."""
        return tuple(f.name for f in self.features)

    @cached_property
    def numbers_only(self) -> bool:
        """Does the model take numbers only (worked out once, read by every prediction)?"""
        features = self.features
        return bool(features) and all(f.dtype in NUMERIC_DTYPES for f in features)

    @property
    def supports_voting_override(self) -> bool:
        return KINDS[self.kind].votes

    def accepts_missing(self, column: FeatureColumn) -> bool:
        """Missing values are fine where the pipeline handles them (imputer, encoder, a
        kind that takes NaN natively)."""
        return (
            column.dtype not in NUMERIC_DTYPES
            or column.has_missing
            or KINDS[self.kind].native_missing
        )

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["features"] = [asdict(f) for f in self.features]
        out["classes"] = None if self.classes is None else list(self.classes)
        categories = self.categories
        out["categories"] = (
            None if categories is None else {name: list(v) for name, v in categories.items()}
        )
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSignature:
        categories = data.get("categories")  # absent from signatures stored before it
        return cls(
            task=data["task"],
            kind=data["kind"],
            features=tuple(FeatureColumn(**f) for f in data["features"]),
            classes=None if data["classes"] is None else tuple(data["classes"]),
            voting=data["voting"],
            categories=None if categories is None else {n: tuple(v) for n, v in categories.items()},
        )
