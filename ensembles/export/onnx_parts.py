"""Which part of a pipeline stops its ONNX conversion: a step, a column transformer, a
member of the ensemble (at any depth), or the ensemble's own converter.

Only run after a conversion failed: each candidate is converted alone, preprocessing
first, then one member of each class, depth first; the first that fails alone is the
part named. If every part converts alone, the combination is what fails: the ensemble.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline

from ensembles.errors import Location, Problem

Convert = Callable[[Any, list[tuple[str, Any]]], object]


def message(exc: BaseException) -> str:
    """The converter's message, one line and bounded."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else f"{text[:297]}..."


def dotted(loc: Location) -> str:
    """``("ensemble", "estimators", "lin")`` as ``ensemble.estimators['lin']``."""
    out = str(loc[0])
    for part in loc[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def adapted(estimator: Any) -> Any:
    """A shallow copy a converter takes, predicting exactly the same.

    skl2onnx refuses ``VotingClassifier(flatten_transform=True)`` (which only shapes
    ``transform``'s output, never ``predict``) and expects voting ``weights`` as an
    array; the copy differs in nothing else. Members are adapted at every depth.
    """
    if isinstance(estimator, Pipeline):
        return Pipeline([(name, adapted(step)) for name, step in estimator.steps])
    if not isinstance(estimator, BaseEstimator):
        return estimator
    clone = copy.copy(estimator)
    if getattr(clone, "flatten_transform", None) is True:
        clone.flatten_transform = False
    if isinstance(getattr(clone, "weights", None), list):
        clone.weights = np.asarray(clone.weights, dtype=np.float64)
    for attribute in ("estimators_", "final_estimator_"):
        value = getattr(clone, attribute, None)
        if isinstance(value, list):
            setattr(clone, attribute, [adapted(member) for member in value])
        elif isinstance(value, BaseEstimator):
            setattr(clone, attribute, adapted(value))
    return clone


def members(estimator: Any, loc: Location) -> Iterator[tuple[Location, Any]]:
    """(location, member) of every fitted member, depth first, one per class and place."""
    named = getattr(estimator, "named_estimators_", None)
    if named is not None and hasattr(named, "items"):
        pairs: list[tuple[Location, Any]] = [
            ((*loc, "estimators", str(name)), member) for name, member in named.items()
        ]
    else:
        pairs = [((*loc, "estimators", i), m) for i, m in enumerate(_list(estimator))]
    final = getattr(estimator, "final_estimator_", None)
    if final is not None:
        pairs.append(((*loc, "final_estimator"), final))
    seen: set[type] = set()
    for member_loc, member in pairs:
        if not isinstance(member, BaseEstimator) or type(member) in seen:
            continue
        seen.add(type(member))
        yield from members(member, member_loc)
        yield member_loc, member


def _list(estimator: Any) -> list[Any]:
    value = getattr(estimator, "estimators_", None)
    if isinstance(value, list):
        return value
    if isinstance(value, np.ndarray):  # gradient boosting: an array of trees per stage
        return list(value.ravel())
    return []


def failing_part(
    pipeline: Pipeline, inputs: list[tuple[str, Any]], convert: Convert, error: BaseException
) -> Problem:
    """The part to blame for ``error``, found by converting the parts one by one."""
    from skl2onnx.common.data_types import FloatTensorType

    preprocess, ensemble = pipeline.steps[0][1], pipeline.steps[-1][1]
    if isinstance(preprocess, ColumnTransformer):
        problem = _failing_transformer(preprocess, inputs, convert)
        if problem is not None:
            return problem
    for loc, member in members(ensemble, ("ensemble",)):
        width = getattr(member, "n_features_in_", None)
        if width is None:
            continue
        try:
            convert(adapted(member), [("X", FloatTensorType([None, int(width)]))])
        except Exception as exc:
            return _problem(loc, member, exc)
    return _problem(("ensemble",), ensemble, error)


def _failing_transformer(
    preprocess: ColumnTransformer, inputs: list[tuple[str, Any]], convert: Convert
) -> Problem | None:
    try:
        convert(preprocess, inputs)
        return None
    except Exception as whole:
        by_column = dict(zip(getattr(preprocess, "feature_names_in_", []), inputs, strict=False))
        for name, transformer, columns in preprocess.transformers_:
            if isinstance(transformer, str):
                continue
            own = [by_column[c][1] for c in columns if c in by_column]
            if not own:
                continue
            try:  # alone, its columns side by side in one input of their type
                convert(transformer, [("X", type(own[0])([None, len(own)]))])
            except Exception as exc:
                return _problem(("preprocess", str(name)), transformer, exc)
        return _problem(("preprocess",), preprocess, whole)


def _problem(loc: Location, part: object, exc: BaseException) -> Problem:
    return Problem(loc, f"{dotted(loc)} ({type(part).__name__}): {message(exc)}")
