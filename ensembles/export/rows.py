"""The rows an export's fidelity is measured on: the version's own hold-out rows.

Training records everything needed to draw its hold-out split again: the dataset (id and
sha256), the target, the features, the task, ``evaluation.holdout_fraction`` and
``random_state``; :func:`ensembles.splits.split_rows` is a pure function of the labels,
the fraction and the seed. A version trained without a hold-out (fraction 0) has no
rows it did not train on: its fidelity is measured on the dataset's rows, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from ensembles.data import read_table, select_training_data
from ensembles.errors import IntegrityError
from ensembles.splits import split_rows

RowSource = Literal["holdout", "dataset"]


@dataclass(frozen=True)
class FidelityRows:
    """Rows in the model's input frame (the columns ``predict`` takes) and their origin."""

    X: pd.DataFrame
    source: RowSource


def fidelity_rows(parquet: bytes, metadata: Mapping[str, Any]) -> FidelityRows:
    """The version's hold-out rows drawn again from its dataset's stored table."""
    dataset = metadata["dataset"]
    table = read_table(parquet, filename=f"{dataset['id']}.parquet")
    features = [f["name"] for f in metadata["features"]]
    data = select_training_data(table, metadata["target"], features, metadata["task"])
    training = metadata.get("training") or {}
    fraction = float((training.get("evaluation") or {}).get("holdout_fraction", 0.0))
    seed = training.get("random_state")
    if fraction <= 0 or seed is None:
        return FidelityRows(data.X, "dataset")
    rows = split_rows(data.y, data.task, fraction, int(seed))
    if rows.holdout is None:  # pragma: no cover - split_rows holds out for fraction > 0
        raise IntegrityError("the version's hold-out split cannot be drawn again")
    return FidelityRows(data.X.iloc[rows.holdout], "holdout")
