"""``metrics.explanations`` at training: the mean |contribution| of each input column (per
class) on up to 1,000 hold-out rows, and the reference row explained predictions start
from.

The reference row is the training rows' typical row: each numeric column's median, each
other column's most frequent value; linear and permutation explanations measure
contributions from it (TreeSHAP needs none: each tree's covers stand for the data).  The
permutation estimate costs ~16 model calls per column and row, so it summarises at most
``PERMUTATION_ROWS`` rows; without a hold-out, ``TRAIN_ROWS`` training rows (evenly spread)
stand in, which keeps the bench forest's summary under a fifth of its training time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.pipeline import Pipeline

from ensembles.explain.attribution import ExplainUnavailableError, ExplanationTooSlowError
from ensembles.explain.explanation import explain, reference_row
from ensembles.tasks import Task

log = logging.getLogger(__name__)

MAX_ROWS = 1_000  # hold-out rows summarised
TRAIN_ROWS = 200  # training rows summarised when nothing is held out (a stand-in)
PERMUTATION_ROWS = 100
BUDGET_S = 120.0  # an explanation past this is left out of the metrics, with a note


def typical_row(X: pd.DataFrame) -> dict[str, Any]:
    """Each column's median (numbers) or most frequent value (others), as JSON values."""
    numeric = X.select_dtypes(include="number", exclude="bool")
    medians = numeric.median()  # one pass over every numeric column
    row: dict[str, Any] = {}
    for name in X.columns:
        if name in medians.index:
            median = medians[name]
            row[str(name)] = None if pd.isna(median) else float(median)
            continue
        column = X[name].dropna()
        value = None if column.empty else column.mode().iloc[0]
        row[str(name)] = value.item() if isinstance(value, np.generic) else value
    return row


def explanation_summary(
    pipeline: Pipeline,
    task: Task,
    classes: Sequence[Any] | None,
    X_train: pd.DataFrame,
    Xbt: NDArray[Any],
    evaluated_on: str,
    notes: list[str],
) -> dict[str, Any] | None:
    """The block, or None with a note saying why there is none."""
    reference = typical_row(X_train)
    encoded = reference_row(pipeline, reference)
    names = None if classes is None else list(classes)
    rows = _spread(Xbt, MAX_ROWS if evaluated_on == "holdout" else TRAIN_ROWS)
    deadline = time.monotonic() + BUDGET_S
    try:
        # The first rows tell whether the method is exact; only then are the others worth it.
        explained = explain(
            pipeline, task, rows[:PERMUTATION_ROWS], names,
            reference=encoded, deadline=deadline, check=False,
        )  # fmt: skip
        contributions = [explained.contributions]
        if explained.exact and len(rows) > PERMUTATION_ROWS:
            rest = explain(
                pipeline, task, rows[PERMUTATION_ROWS:], names,
                reference=encoded, deadline=deadline, check=False,
            )  # fmt: skip
            contributions.append(rest.contributions)
    except ExplainUnavailableError:
        notes.append("no metrics.explanations: the optional 'explain' extra is not installed")
        return None
    except ExplanationTooSlowError:
        notes.append(f"no metrics.explanations: explaining took longer than {BUDGET_S:.0f} s")
        return None
    except Exception as exc:  # a summary never costs the version: noted, logged, left out
        log.exception("metrics.explanations failed")
        notes.append(f"no metrics.explanations: {type(exc).__name__}: {exc}")
        return None
    summarised = np.concatenate(contributions)
    mean_abs = np.abs(summarised).mean(axis=0)  # (outputs, features)
    labels = explained.outputs_named or ("value",)
    return {
        "evaluated_on": evaluated_on,
        "rows": len(summarised),
        "space": explained.space,
        "method": explained.method,
        "exact": explained.exact,
        "mean_abs": {
            label: _by_column(explained.features, values)
            for label, values in zip(labels, mean_abs, strict=True)
        },
        "reference": reference,
    }


def _spread(X: NDArray[Any], most: int) -> NDArray[Any]:
    """At most ``most`` rows of X, evenly spaced (all of them when there are fewer)."""
    if len(X) <= most:
        return X
    return X[np.linspace(0, len(X) - 1, most).round().astype(np.intp)]


def _by_column(features: tuple[str, ...], values: NDArray[Any]) -> Mapping[str, float]:
    return {name: float(v) for name, v in zip(features, values, strict=True)}
