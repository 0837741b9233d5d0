"""Which part of a pipeline stops its ONNX conversion: a step, a column transformer, a
member of the ensemble (at any depth), or the ensemble's own converter.

Only run after a conversion failed or was not faithful: preprocessing is converted and
run alone on the rows and compared with scikit-learn's ``transform`` (then each of its
transformers), then one member of each class is converted alone, depth first; the first
that fails alone is the part named. If every part passes alone, the combination is what
fails: the ensemble.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any, Final

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline

from ensembles.errors import Location, Problem

TOLERANCE: Final = 1e-4  # the bound of the whole graph, applied to a part's output


def message(exc: BaseException) -> str:
    """The converter's message, one line and bounded, with its cause (skl2onnx wraps the
    real reason, and dumps the node's attributes, which are cut)."""
    text = " ".join(str(exc).split()).split(" and attributes=")[0] or type(exc).__name__
    cause = exc.__cause__
    if cause is not None and str(cause):
        text += f": {' '.join(str(cause).split())}"
    return text if len(text) <= 300 else f"{text[:297]}..."


def dotted(loc: Location) -> str:
    """``("ensemble", "estimators", "lin")`` as ``ensemble.estimators.lin``, indices as ``[0]``."""
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


Trial = Callable[[Any, list[tuple[str, Any]], list[np.ndarray[Any, Any]]], list[Any]]
"""Convert a model for these inputs and run it on these arrays (one per input)."""


def failing_part(
    pipeline: Pipeline,
    X: pd.DataFrame,
    inputs: list[tuple[str, Any]],
    trial: Trial,
    error: str,
) -> Problem:
    """The part to blame for ``error``: the first that fails, or answers differently from
    scikit-learn, on its own: preprocessing and its transformers (run on ``X``), then one
    member of each class (converted); else the ensemble."""
    from skl2onnx.common.data_types import FloatTensorType

    preprocess, ensemble = pipeline.steps[0][1], pipeline.steps[-1][1]
    if isinstance(preprocess, ColumnTransformer):
        problem = _failing_preprocess(preprocess, X, inputs, trial)
        if problem is not None:
            return problem
    for loc, member in members(ensemble, ("ensemble",)):
        width = getattr(member, "n_features_in_", None)
        if width is None:
            continue
        try:
            trial(adapted(member), [("X", FloatTensorType([None, int(width)]))], [])
        except Exception as exc:
            return _problem(loc, member, message(exc))
    return _problem(("ensemble",), ensemble, error)


def _failing_preprocess(
    preprocess: ColumnTransformer,
    X: pd.DataFrame,
    inputs: list[tuple[str, Any]],
    trial: Trial,
) -> Problem | None:
    columns = [column_array(X[name]) for name in X.columns]
    whole = _differs(preprocess, trial, inputs, columns, X)
    if whole is None:
        return None
    position = {name: i for i, name in enumerate(X.columns)}
    for name, transformer, selected in preprocess.transformers_:
        if isinstance(transformer, str) or not len(selected):
            continue
        first = inputs[position[selected[0]]][1]
        kind = columns[position[selected[0]]].dtype
        arrays = [np.hstack([columns[position[c]] for c in selected]).astype(kind)]
        own = [("X", type(first)([None, len(selected)]))]
        found = _differs(transformer, trial, own, arrays, X[list(selected)])
        if found is not None:
            return _problem(("preprocess", str(name)), transformer, found)
    return _problem(("preprocess",), preprocess, whole)


def column_array(values: pd.Series) -> np.ndarray[Any, Any]:
    """One table column as the graph's ``[N, 1]`` input takes it: int64, float32, or
    strings (booleans as ``"True"``/``"False"``, a missing string as ``"nan"``)."""
    if pd.api.types.is_integer_dtype(values.dtype):
        return values.to_numpy(np.int64).reshape(-1, 1)
    if pd.api.types.is_float_dtype(values.dtype):
        return values.to_numpy(np.float32).reshape(-1, 1)
    return values.astype(str).to_numpy(dtype=object).reshape(-1, 1)


def _differs(
    part: Any,
    trial: Trial,
    inputs: list[tuple[str, Any]],
    arrays: list[np.ndarray[Any, Any]],
    X: pd.DataFrame,
) -> str | None:
    """Why ``part``'s graph does not reproduce ``part.transform(X)``, or None."""
    try:
        got = np.asarray(trial(part, inputs, arrays)[0], dtype=np.float64)
    except Exception as exc:
        return message(exc)
    expected = np.asarray(part.transform(X), dtype=np.float64)
    if got.shape != expected.shape:
        return (
            f"its ONNX graph gives {got.shape[-1]} columns where scikit-learn gives "
            f"{expected.shape[-1]}"
        )
    if not np.array_equal(np.isnan(got), np.isnan(expected)):
        return "its ONNX graph has missing values where scikit-learn has none, or none where it has"
    gaps = np.abs(got - expected)[~np.isnan(expected)]
    worst = float(gaps.max()) if gaps.size else 0.0
    if worst > TOLERANCE:
        return f"its ONNX graph differs from scikit-learn by up to {worst:.3g}"
    return None


def _problem(loc: Location, part: object, why: str) -> Problem:
    return Problem(loc, f"{dotted(loc)} ({type(part).__name__}): {why}")
