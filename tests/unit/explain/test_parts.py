"""Rows explained in parts on forked processes: the very contributions of one call, and a
child that fails or outlives the deadline has its part explained by the parent."""

from __future__ import annotations

import os
import time
from functools import cache
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from ensembles.explain import summary
from ensembles.explain.explanation import Explained, explain
from ensembles.explain.parts import ExplainPart, in_parts
from ensembles.training import FittedModel
from tests.unit.explain.test_summary_budget import _train_forest


@cache
def _model() -> FittedModel:
    return _train_forest(2)


def _explainer() -> tuple[ExplainPart, NDArray[Any]]:
    model = _model()
    rows = np.asarray(model.pipeline[:-1].transform(model.train_rows[:90]), dtype=np.float64)

    def explain_part(part: NDArray[Any]) -> Explained:
        return explain(model.pipeline, "classification", part, ["no", "yes"], check=False)

    return explain_part, rows


def _joined(parts: list[Explained]) -> NDArray[Any]:
    return np.concatenate([p.contributions for p in parts])


@pytest.mark.parametrize("processes", [2, 3])
def test_parts_on_children_are_one_call_s_contributions(processes: int) -> None:
    explain_part, rows = _explainer()
    parts = in_parts(explain_part, rows, processes, time.monotonic() + 120)
    assert len(parts) == processes
    np.testing.assert_array_equal(_joined(parts), explain_part(rows).contributions)


def test_a_failing_child_s_part_is_explained_by_the_parent() -> None:
    explain_part, rows = _explainer()
    parent = os.getpid()

    def fails_in_a_child(part: NDArray[Any]) -> Explained:
        if os.getpid() != parent:
            raise RuntimeError("a child that cannot explain")
        return explain_part(part)

    parts = in_parts(fails_in_a_child, rows, 2, time.monotonic() + 120)
    np.testing.assert_array_equal(_joined(parts), explain_part(rows).contributions)


def test_a_child_past_the_deadline_is_stopped_and_its_part_explained_here() -> None:
    explain_part, rows = _explainer()
    parent = os.getpid()

    def hangs_in_a_child(part: NDArray[Any]) -> Explained:
        if os.getpid() != parent:
            time.sleep(600)
        return explain_part(part)

    parts = in_parts(hangs_in_a_child, rows, 2, time.monotonic() + 1.0)
    np.testing.assert_array_equal(_joined(parts), explain_part(rows).contributions)


def test_a_summary_shared_by_processes_is_the_summary_of_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Training's summary (the job's CPUs) with every model's rows shared, against one
    process: the same block."""
    monkeypatch.setattr(summary, "SHARED_STEPS", 0.0)
    model = _model()
    Xbt = np.asarray(model.pipeline[:-1].transform(model.train_rows), dtype=np.float64)
    blocks = [_summary(model, Xbt[:300], n) for n in (1, 2)]
    assert blocks[0] is not None and blocks[0]["rows"] == 300
    assert blocks[0] == blocks[1]


def _summary(model: FittedModel, Xbt: NDArray[Any], processes: int) -> dict[str, Any] | None:
    return summary.explanation_summary(
        model.pipeline, "classification", ["no", "yes"], model.train_rows, Xbt, "holdout", [],
        processes,
    )  # fmt: skip
