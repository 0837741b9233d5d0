"""skops and ONNX exports of every kind and task of ``tests/kinds.py``.

skops: loads with exactly the types the export lists, and predicts identically. ONNX:
either the graph, run here on onnxruntime as a consumer would, answers as the stored
model on the hold-out rows within the bound (and the measured fidelity says so), or the
export is refused naming the part; ``docs/export.md`` lists which, and must agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
import skops.io

from ensembles.export import UNTRUSTED_TYPES, export_model
from ensembles.export.onnx_format import INPUTS_METADATA, MAX_ABS_DIFF, feeds
from tests.kinds import cases
from tests.unit.export.outcomes import BEGIN, END, onnx_outcome, table, trained

PAGE = Path(__file__).parents[3] / "docs" / "export.md"


@pytest.mark.parametrize(("kind", "task"), cases())
def test_skops_loads_with_the_listed_types_and_predicts_identically(kind: str, task: str) -> None:
    model = trained(kind, task)
    exported = export_model(model.pipeline, "skops", None)
    listed = [t for t in exported.info[UNTRUSTED_TYPES].split(",") if t]
    assert sorted(skops.io.get_untrusted_types(data=exported.data)) == listed
    loaded = skops.io.loads(exported.data, trusted=listed)
    X = model.holdout.X
    assert np.array_equal(loaded.predict(X), model.pipeline.predict(X))
    if hasattr(model.pipeline, "predict_proba"):
        assert np.array_equal(loaded.predict_proba(X), model.pipeline.predict_proba(X))


def fidelity(header: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in header.split("; "))


@pytest.mark.parametrize(("kind", "task"), cases())
def test_onnx_converts_within_the_bound_or_names_the_part(kind: str, task: str) -> None:
    outcome, model = onnx_outcome(kind, task), trained(kind, task)
    if outcome.error is not None:
        (problem,) = outcome.error.problems
        assert problem.loc[0] in ("preprocess", "ensemble")
        assert problem.msg.startswith(problem.loc[0])  # the message names the part too
        return
    assert outcome.exported is not None
    X, pipeline = model.holdout.X, model.pipeline
    graph = onnx.load_from_string(outcome.exported.data)
    meta = {p.key: p.value for p in graph.metadata_props}
    assert INPUTS_METADATA in meta
    session = onnxruntime.InferenceSession(
        outcome.exported.data, providers=["CPUExecutionProvider"]
    )
    assert [i.shape[1] for i in session.get_inputs()] == [1] * X.shape[1]  # one per column
    names = [i.name for i in session.get_inputs()]
    out: list[Any] = session.run(None, feeds(X, names))
    measured = fidelity(outcome.exported.info["fidelity"])
    assert measured["rows"] == str(len(X)) and measured["rows_from"] == "holdout"
    if task == "regression":
        diff = np.max(np.abs(out[0].ravel() - pipeline.predict(X)))
        assert diff <= MAX_ABS_DIFF and float(measured["max_abs_diff"]) == pytest.approx(
            diff, rel=1e-2
        )
        return
    agreement = np.mean(out[0].astype(str) == pipeline.predict(X).astype(str))
    assert float(measured["label_agreement"]) == pytest.approx(agreement)
    if hasattr(pipeline, "predict_proba"):
        diff = np.max(np.abs(out[1] - pipeline.predict_proba(X)))
        assert diff <= MAX_ABS_DIFF
    else:  # hard voting: the labels are the whole answer
        assert agreement == 1.0 and measured["max_abs_diff"] == "none"


def test_the_page_lists_what_converts_as_measured() -> None:
    text = PAGE.read_text()
    shown = text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()
    assert shown == table(), "run: python -m tests.unit.export.outcomes"
