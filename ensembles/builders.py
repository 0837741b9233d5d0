"""Spec -> unfitted scikit-learn estimator, wrapped in ``Pipeline(preprocessing, ensemble)``.

The result is a plain scikit-learn object (no classes of this service inside), so a
downloaded artifact loads with joblib and scikit-learn alone.  Numeric columns reach the
ensemble untouched unless they had missing values at training time (then they are
median-imputed with a missing-indicator); string and boolean columns are one-hot encoded
with unknown categories ignored — except in front of a kind that handles missing values
and categories natively (histogram gradient boosting, at the top level): it gets every
numeric column as it is and ordinal codes.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

from ensembles.catalog import KINDS
from ensembles.specs import EstimatorSpec
from ensembles.tasks import Task

NUMERIC_DTYPES = frozenset({"int64", "float64"})
HGB_MAX_CATEGORIES = 255


@dataclass(frozen=True)
class FeatureColumn:
    """What preprocessing needs to know of one feature column of the training table."""

    name: str
    dtype: str  # int64, float64, bool, string
    has_missing: bool
    n_unique: int = 0


def build_estimator(spec: EstimatorSpec, task: Task, random_state: int | None) -> BaseEstimator:
    """The unfitted estimator of a resolved spec; every random_state at every level is seeded."""
    kind = KINDS[spec.kind]
    cls = kind.classes[task]
    own = spec.params if kind.estimator_params is None else kind.estimator_params(task, spec.params)
    params: dict[str, Any] = {**kind.fixed, **own}
    calibrate = kind.calibrate_param is not None and bool(params.pop(kind.calibrate_param, False))
    if spec.estimator is not None:
        params["estimator"] = build_estimator(spec.estimator, task, random_state)
    if spec.estimators is not None:
        params["estimators"] = [
            (m.name, build_estimator(m, task, random_state)) for m in spec.estimators
        ]
    if spec.final_estimator is not None:
        params["final_estimator"] = build_estimator(spec.final_estimator, task, random_state)
    for name in kind.tuple_params & params.keys():
        params[name] = tuple(params[name])
    if "random_state" in _constructor_params(cls):
        params["random_state"] = random_state
    estimator: BaseEstimator = cls(**params)
    if calibrate:
        # SVC(probability=True) is deprecated in scikit-learn 1.9; this is its replacement.
        estimator = CalibratedClassifierCV(estimator, ensemble=False)
    return estimator


@cache
def _constructor_params(cls: type) -> set[str]:
    """Its constructor's parameters, and those it takes as ``**kwargs`` but lists in
    ``get_params`` (XGBoost's ``random_state``)."""
    named = set(inspect.signature(cls).parameters)
    if "kwargs" not in named:
        return named
    return named | set(cls().get_params(deep=False))


def build_preprocessing(
    features: Sequence[FeatureColumn],
    *,
    native_missing: bool = False,
    native_categorical: bool = False,
    max_categories: int | None = HGB_MAX_CATEGORIES,
    integer_categories: bool = False,
) -> ColumnTransformer:
    """Column handling in front of the ensemble, fitted together with it."""
    passthrough = [f.name for f in features if f.dtype in NUMERIC_DTYPES and not f.has_missing]
    imputed = [f.name for f in features if f.dtype in NUMERIC_DTYPES and f.has_missing]
    categorical = [f for f in features if f.dtype not in NUMERIC_DTYPES]
    transformers: list[tuple[str, Any, list[str]]] = []
    if native_missing:
        # The ensemble takes NaN itself: every numeric column passes.
        passthrough, imputed = passthrough + imputed, []
    if passthrough:
        transformers.append(("numeric", "passthrough", passthrough))
    if imputed:
        transformers.append(
            ("imputed", SimpleImputer(strategy="median", add_indicator=True), imputed)
        )
    ordinal = [
        f.name
        for f in categorical
        if native_categorical and (max_categories is None or f.n_unique <= max_categories)
    ]
    one_hot = [f.name for f in categorical if f.name not in ordinal]
    if ordinal:
        missing = -1 if integer_categories else float("nan")
        encoder = OrdinalEncoder(
            handle_unknown="use_encoded_value",
            unknown_value=missing,
            encoded_missing_value=missing,
            dtype=object if integer_categories else np.float64,
        )
        transformers.append(("categorical", encoder, ordinal))
    if one_hot:
        transformers.append(
            ("one_hot", OneHotEncoder(handle_unknown="ignore", sparse_output=False), one_hot)
        )
    return ColumnTransformer(transformers, remainder="drop", verbose_feature_names_out=True)


def build_pipeline(
    spec: EstimatorSpec,
    task: Task,
    features: Sequence[FeatureColumn],
    random_state: int | None,
) -> Pipeline:
    """``Pipeline([("preprocess", ...), ("ensemble", ...)])`` for a resolved spec."""
    kind = KINDS[spec.kind]
    preprocessing = build_preprocessing(
        features,
        native_missing=kind.native_missing,
        native_categorical=kind.native_categorical,
        max_categories=kind.native_max_categories,
        integer_categories=kind.integer_categories,
    )
    ensemble = build_estimator(spec, task, random_state)
    if kind.native_categorical:
        n_ordinal, width = _ordinal_positions(preprocessing)
        if n_ordinal and kind.categorical_params is not None:
            assert width is not None  # such kinds take every category column as codes
            ensemble.set_params(**kind.categorical_params(n_ordinal, width))
        elif n_ordinal:
            ensemble.set_params(categorical_features=n_ordinal)
    return Pipeline([("preprocess", preprocessing), ("ensemble", ensemble)])


def _ordinal_positions(preprocessing: ColumnTransformer) -> tuple[list[int], int | None]:
    """Output positions of ordinal-coded columns (transformers are stacked in order), and
    the output width (None: one-hot columns make it known only once fitted)."""
    start, positions = 0, []
    for name, _, columns in preprocessing.transformers:
        width = len(columns)
        if name == "categorical":
            positions = list(range(start, start + width))
        start += width
    one_hot = any(name == "one_hot" for name, _, _ in preprocessing.transformers)
    return positions, None if one_hot else start


def output_columns(preprocessing: ColumnTransformer) -> list[str]:
    """The original column behind each output column of a fitted preprocessing step.

    Importances of one-hot and indicator columns are summed back onto the user's columns.
    """
    out: list[str] = []
    for name, transformer, columns in preprocessing.transformers_:
        if name == "remainder":
            continue
        if name == "one_hot":
            for column, categories in zip(columns, transformer.categories_, strict=True):
                out.extend([column] * len(categories))
        elif name == "imputed":
            out.extend(columns)
            indicator = transformer.indicator_
            if indicator is not None:
                out.extend(columns[i] for i in indicator.features_)
        else:
            out.extend(columns)
    return out


def known_categories(preprocessing: ColumnTransformer) -> dict[str, tuple[Any, ...]]:
    """The categories each encoded column had in training, as plain JSON values (str, bool).

    Read from the fitted encoders rather than from the dataset: they saw only the training
    rows (not a hold-out), and what they know is exactly what the model will not treat as
    unknown.  The missing value (NaN, a category of its own to the encoders) is left out:
    missing cells are checked elsewhere, against ``FeatureColumn.has_missing``.
    """
    known: dict[str, tuple[Any, ...]] = {}
    for name, transformer, columns in preprocessing.transformers_:
        if name not in ("one_hot", "categorical"):
            continue
        for column, categories in zip(columns, transformer.categories_, strict=True):
            plain = np.asarray(categories, dtype=object).tolist()
            known[str(column)] = tuple(
                bool(v) if isinstance(v, np.bool_) else v for v in plain if not pd.isna(v)
            )
    return known
