"""A pipeline's explanation of checked rows, as API.md's ``explanations`` document.

The model after preprocessing is attributed on the encoded columns
(:func:`ensembles.explain.methods.attribute`), then the encoded columns are summed back
onto the table's input columns (one-hot and missing-indicator columns onto the column
they encode).  ``outputs`` are the model's own, computed apart from the attribution, so
``additivity_error`` measures the attribution against the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.pipeline import Pipeline

from ensembles.builders import output_columns
from ensembles.catalog import kind_of
from ensembles.explain.attribution import Attribution, Budget, FloatArray, Output
from ensembles.explain.methods import attribute, output_function
from ensembles.tasks import Task

Space = Literal["probability", "margin", "value", "votes"]
OTHER = "(other)"


@dataclass(frozen=True)
class Explained:
    """Contributions summed onto the input ``features``: ``contributions`` (n, k, F),
    ``base`` (k,), the model's ``outputs`` (n, k), the names of the k outputs (None:
    regression)."""

    space: Space
    method: str
    exact: bool
    features: tuple[str, ...]
    outputs_named: tuple[str, ...] | None
    base: FloatArray
    outputs: FloatArray
    contributions: FloatArray

    @property
    def additivity_error(self) -> float:
        if self.outputs.size == 0:
            return 0.0
        summed = self.base[None, :] + self.contributions.sum(axis=2)
        return float(np.max(np.abs(summed - self.outputs)))

    def document(self, top: int | None = None) -> dict[str, Any]:
        """API.md's ``explanations``; ``top`` keeps the largest contributions per row and
        class and adds the rest as ``(other)``."""
        rows = [self._row(i, top) for i in range(self.outputs.shape[0])]
        named = self.outputs_named
        return {
            "space": self.space,
            "method": self.method,
            "exact": self.exact,
            "features": list(self.features),
            "base_values": float(self.base[0]) if named is None else _by_name(named, self.base),
            "outputs": [float(o[0]) if named is None else _by_name(named, o) for o in self.outputs],
            "contributions": rows,
            "additivity_error": self.additivity_error,
        }

    def _row(self, i: int, top: int | None) -> Any:
        per_output = [_kept(self.features, c, top) for c in self.contributions[i]]
        if self.outputs_named is None:
            return per_output[0]
        return dict(zip(self.outputs_named, per_output, strict=True))


def _by_name(names: Sequence[str], values: FloatArray) -> dict[str, float]:
    return {name: float(v) for name, v in zip(names, values, strict=True)}


def _kept(features: Sequence[str], values: FloatArray, top: int | None) -> dict[str, float]:
    if top is None or top >= len(features):
        return _by_name(features, values)
    order = np.argsort(-np.abs(values), kind="stable")
    kept = {features[j]: float(values[j]) for j in order[:top]}
    kept[OTHER] = float(values[order[top:]].sum())
    return kept


def top_output(estimator: Any, task: Task) -> tuple[Output, Space]:
    """What the explanation explains at the top: regression values; a classifier's
    margins where its kind adds raw scores, else its probabilities, else a hard vote's
    weighted vote shares."""
    if task == "regression":
        return "value", "value"
    kind = kind_of(estimator)
    scored = hasattr(estimator, "decision_function")
    if kind is not None and kind.explain_space == "margin" and (scored or kind.raw_scores):
        return "margin", "margin"
    if hasattr(estimator, "predict_proba"):
        return "proba", "probability"
    return "shares", "votes"


def explain(
    pipeline: Pipeline,
    task: Task,
    Xt: NDArray[Any],
    classes: Sequence[Any] | None,
    *,
    seed: int = 0,
    deadline: float | None = None,
    reference: FloatArray | None = None,
    served: FloatArray | None = None,
    check: bool = True,
) -> Explained:
    """The explanation of the encoded rows ``Xt`` of the table; ``classes`` the labels in
    the model's order; ``reference`` the encoded reference row (linear and permutation
    methods start from it; None: zeros); ``served`` the outputs the service answered for
    the rows when they are what is explained (probabilities or values of its engine, as
    :func:`served_outputs` gives them), else the model is asked; ``check`` False skips
    that call (a summary never shows outputs: they are then the attribution's own sums)."""
    estimator = pipeline[-1]
    encoded_of = output_columns(pipeline[0])
    used = set(encoded_of)  # in the table's order, as the preprocessing took them
    features = tuple(str(c) for c in pipeline[0].feature_names_in_ if c in used)
    groups = np.array([features.index(c) for c in encoded_of], dtype=np.intp)
    output, space = top_output(estimator, task)
    X = np.asarray(Xt, dtype=np.float64)
    budget = Budget(seed=seed, deadline=deadline, reference=reference, groups=groups)
    attribution: Attribution = attribute(estimator, X, output, budget)
    summing = np.zeros((len(groups), len(features)))
    summing[np.arange(len(groups)), groups] = 1.0
    names = None if classes is None else [str(c) for c in classes]
    if names is not None and attribution.base.shape[0] == 1 and len(names) == 2:
        names = names[1:]  # one margin: the second class's (log-)odds
    return Explained(
        space=space,
        method=attribution.method,
        exact=attribution.exact,
        features=features,
        outputs_named=None if names is None else tuple(names),
        base=attribution.base,
        outputs=_outputs(estimator, output, X, served) if check else attribution.outputs(),
        contributions=attribution.phi @ summing,
    )


def _outputs(
    estimator: Any, output: Output, X: FloatArray, served: FloatArray | None
) -> FloatArray:
    if not len(X):
        return np.zeros((0, 1))
    if served is not None:
        return served
    return output_function(estimator, output)(X)


def served_outputs(
    estimator: Any, task: Task, predictions: Any, probabilities: Any
) -> FloatArray | None:
    """An engine's answer as the outputs an explanation explains, when it is that space
    (probabilities, regression values), else None (margins and vote shares)."""
    output, _ = top_output(estimator, task)
    if output == "value":
        return np.asarray(predictions, dtype=np.float64).reshape(-1, 1)
    if output == "proba" and probabilities is not None:
        return np.asarray(probabilities, dtype=np.float64)
    return None


def reference_row(pipeline: Pipeline, values: Mapping[str, Any] | None) -> FloatArray | None:
    """The encoded reference row from its cells in the table's columns, or None."""
    if not values:
        return None
    frame = pd.DataFrame({name: [value] for name, value in values.items()})
    encoded: FloatArray = np.asarray(pipeline[0].transform(frame), dtype=np.float64)[0]
    return encoded
