"""What a fitted ensemble says about itself: its feature importances summed back onto
the user's columns, and how many members it fitted."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from ensembles.builders import output_columns
from ensembles.catalog import Kind, kind_of
from ensembles.members import members_of


def feature_importances(pipeline: Pipeline, kind: Kind) -> dict[str, float] | None:
    """Importances summed back onto the user's columns, where the estimator has them."""
    ensemble = pipeline[-1]
    raw = _raw_importances(ensemble, kind)
    if raw is None or not np.all(np.isfinite(raw)):  # a target near float64's limit: NaN
        return None
    columns = output_columns(pipeline[0])
    if len(columns) != len(raw):
        return None
    out: dict[str, float] = {}
    for column, value in zip(columns, raw, strict=True):
        out[column] = out.get(column, 0.0) + float(value)
    total = sum(out.values())
    if total > 0:
        out = {k: v / total for k, v in out.items()}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _raw_importances(ensemble: BaseEstimator, kind: Kind) -> NDArray[np.float64] | None:
    if kind.importances == "members_mean":  # each member on the columns it was fed
        return _members_importances(ensemble)
    if kind.importances == "none":
        return None
    try:
        values = getattr(ensemble, "feature_importances_", None)
    except (AttributeError, ValueError):
        values = None
    return None if values is None else np.asarray(values, dtype=np.float64)


def _members_importances(ensemble: BaseEstimator) -> NDArray[np.float64] | None:
    total = np.zeros(ensemble.n_features_in_)
    for member in members_of(ensemble, with_samples=False):  # their rows are not needed
        member_values = getattr(member.estimator, "feature_importances_", None)
        if member_values is None:
            return None
        if member.features is None:  # pasting_votes: every column
            total += member_values
        else:
            np.add.at(total, member.features, member_values)
    return total / max(len(ensemble.estimators_), 1)


def fitted_estimator_count(ensemble: BaseEstimator) -> int:
    kind = kind_of(ensemble)
    if kind is not None and kind.stages is not None:  # a library's rounds it predicts with
        return kind.stages.count(ensemble)
    for attr in ("n_estimators_", "n_iter_"):
        value = getattr(ensemble, attr, None)
        if isinstance(value, int | np.integer):
            return int(value)
    estimators = getattr(ensemble, "estimators_", None)
    return len(estimators) if estimators is not None else 1
