"""``metrics.explanations`` at training: the mean |contribution| of each input column (per
class) on up to 1,000 hold-out rows, and the reference row explained predictions start
from.

The reference row is the training rows' typical row: each numeric column's median, each
other column's most frequent value; linear and permutation explanations measure
contributions from it (TreeSHAP needs none: each tree's covers stand for the data).  The
permutation estimate costs ~16 model calls per column and row, so it summarises at most
``PERMUTATION_ROWS`` rows; without a hold-out, ``TRAIN_ROWS`` training rows (evenly spread)
stand in, which keeps the bench forest's summary under a fifth of its training time.

TreeSHAP costs each row about leaves x depth² steps per tree, so a forest grown on
200,000 rows costs ~0.4 s a row (149 s for 200 rows against a 379 s fit).  The rows are
held to ``WORK_BUDGET`` steps, counted from the fitted trees: the same spec and seed give
the same rows and figures on any machine, whatever its load (a clock would not).
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
from ensembles.explain.explanation import Explained, explain, reference_row
from ensembles.tasks import Task

log = logging.getLogger(__name__)

MAX_ROWS = 1_000  # hold-out rows summarised
TRAIN_ROWS = 200  # training rows summarised when nothing is held out (a stand-in)
PERMUTATION_ROWS = 100
BUDGET_S = 120.0  # an explanation past this is left out of the metrics, with a note
# TreeSHAP steps (leaves x depth², summed over the trees) per summary: ~2 s on one core of
# the 2-CPU development machine; never fewer than MIN_ROWS rows.
WORK_BUDGET = 1.5e9
MIN_ROWS = 10


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
    allowed = min(len(Xbt), MAX_ROWS if evaluated_on == "holdout" else TRAIN_ROWS)
    work = tree_work(pipeline[-1])
    rows = _spread(Xbt, summary_rows(work, allowed))
    deadline = time.monotonic() + BUDGET_S

    def explain_part(part: NDArray[Any]) -> Explained:
        return explain(
            pipeline, task, part, names, reference=encoded, deadline=deadline, check=False
        )

    try:
        # The first rows tell whether the method is exact; only then are the others worth it.
        explained = explain_part(rows[:PERMUTATION_ROWS])
        contributions = [explained.contributions]
        if explained.exact and len(rows) > PERMUTATION_ROWS:
            contributions.append(explain_part(rows[PERMUTATION_ROWS:]).contributions)
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
    note = _rows_note(len(summarised), allowed, evaluated_on, explained.exact, work, notes)
    return {
        "evaluated_on": evaluated_on,
        "rows": len(summarised),
        **({"note": note} if note else {}),
        "space": explained.space,
        "method": explained.method,
        "exact": explained.exact,
        "mean_abs": {
            label: _by_column(explained.features, values)
            for label, values in zip(labels, mean_abs, strict=True)
        },
        "reference": reference,
    }


def tree_work(estimator: Any) -> float:
    """TreeSHAP's steps to explain one row: leaves x depth² summed over the model's
    scikit-learn trees (0 for a model without them; the boosting libraries explain with
    their own threaded code, at a fraction of this cost)."""
    tree = getattr(estimator, "tree_", None)
    if tree is not None:
        return float(tree.n_leaves) * max(int(tree.max_depth), 1) ** 2
    predictors = getattr(estimator, "_predictors", None)  # histogram gradient boosting
    if isinstance(predictors, list):
        return sum(_histogram_work(p.nodes) for stage in predictors for p in stage)
    if isinstance(estimator, Pipeline):
        return tree_work(estimator[-1])
    members = getattr(estimator, "estimators_", None)
    if members is None:
        return 0.0
    flat = members.ravel() if isinstance(members, np.ndarray) else members
    return sum(tree_work(m) for m in flat)


def holds_the_gil(pipeline: Pipeline) -> bool:
    """Is this model's summary shap's TreeSHAP of scikit-learn's trees?  Its native call
    holds the GIL for all the rows it is given, on one core (the boosting libraries'
    own TreeSHAP runs on their threads without it): work that needs no GIL is best run
    beside it (:mod:`ensembles.engine_verdict`)."""
    return tree_work(pipeline) > 0


def summary_rows(work: float, available: int) -> int:
    """How many rows fit ``WORK_BUDGET`` (at least ``MIN_ROWS``, at most ``available``)."""
    if work <= 0:
        return available
    return min(available, max(MIN_ROWS, int(WORK_BUDGET // work)))


def _rows_note(
    rows: int, allowed: int, evaluated_on: str, exact: bool, work: float, notes: list[str]
) -> str | None:
    """Why the summary has fewer than ``MAX_ROWS`` rows (None: it has them all); a cut by
    the budget is also one of the version's notes."""
    if rows < (allowed if exact else min(allowed, PERMUTATION_ROWS)):
        cut = (
            f"{rows} of {allowed} {evaluated_on} rows, evenly spread: this model's trees "
            f"cost {work:.3g} TreeSHAP steps (leaves x depth²) a row, and the summary is "
            f"held to {WORK_BUDGET:.3g} steps (at least {MIN_ROWS} rows)"
        )
        notes.append(f"metrics.explanations: {cut}")
        return cut
    if rows >= MAX_ROWS:
        return None
    if not exact:
        return f"{rows} rows: a permutation estimate summarises at most {PERMUTATION_ROWS}"
    if evaluated_on != "holdout":
        return f"{rows} training rows, evenly spread, stand in: no rows were held out"
    return f"all {rows} hold-out rows"


def _histogram_work(nodes: NDArray[Any]) -> float:
    return float(np.count_nonzero(nodes["is_leaf"])) * max(int(nodes["depth"].max()), 1) ** 2


def _spread(X: NDArray[Any], most: int) -> NDArray[Any]:
    """At most ``most`` rows of X, evenly spaced (all of them when there are fewer)."""
    if len(X) <= most:
        return X
    return X[np.linspace(0, len(X) - 1, most).round().astype(np.intp)]


def _by_column(features: tuple[str, ...], values: NDArray[Any]) -> Mapping[str, float]:
    return {name: float(v) for name, v in zip(features, values, strict=True)}
