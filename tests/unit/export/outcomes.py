"""Every kind of ``tests/kinds.py`` trained once with a hold-out, and what its ONNX export
does: the table ``docs/export.md`` shows is generated from these outcomes.

``python -m tests.unit.export.outcomes`` prints the table (paste it into the page);
``tests/unit/export/test_every_kind.py`` fails when the page and the outcomes differ.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cache

from sklearn.pipeline import Pipeline

from ensembles.catalog import KINDS
from ensembles.export import Exported, ExportError, FidelityRows, export_model
from ensembles.export.onnx_parts import dotted
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.splits import split_rows
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.kinds import SPECS, TASKS
from tests.unit.datasets import training_data

HOLDOUT = 0.2
SEED = 3
BEGIN, END = "<!-- onnx-outcomes:begin -->", "<!-- onnx-outcomes:end -->"


@dataclass(frozen=True)
class Trained:
    pipeline: Pipeline
    holdout: FidelityRows


@dataclass(frozen=True)
class Outcome:
    exported: Exported | None
    error: ExportError | None

    @property
    def cell(self) -> str:
        if self.exported is not None:
            return "converts"
        assert self.error is not None
        part = ", ".join(f"`{dotted(p.loc)}`" for p in self.error.problems)
        return f"409: {part}, {self.reason}"

    @property
    def reason(self) -> str:
        assert self.error is not None
        return "not faithful" if "not faithful" in self.error.detail else "does not convert"


def dataset(task: str) -> str:
    return "wine" if task == "classification" else "diabetes"


@cache
def trained(kind: str, task: str) -> Trained:
    data = training_data(dataset(task))
    spec = resolve_ensemble(parse_estimator_spec(SPECS[kind, task]), data.task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = train(data, spec, EvaluationSpec(holdout_fraction=HOLDOUT, cv_folds=0), SEED)
    rows = split_rows(data.y, data.task, HOLDOUT, SEED)
    assert rows.holdout is not None
    return Trained(fitted.pipeline, FidelityRows(data.X.iloc[rows.holdout], "holdout"))


@cache
def onnx_outcome(kind: str, task: str) -> Outcome:
    model = trained(kind, task)
    try:
        return Outcome(export_model(model.pipeline, "onnx", model.holdout), None)
    except ExportError as exc:
        return Outcome(None, exc)


def table() -> str:
    """One row per kind: what its ONNX export does for each task it has."""
    lines = ["| kind | classification | regression |", "|---|---|---|"]
    for kind in dict.fromkeys(k for k, _ in SPECS):
        cells = [
            onnx_outcome(kind, task).cell if task in KINDS[kind].tasks else "(no such task)"
            for task in TASKS
        ]
        lines.append(f"| `{kind}` | {' | '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(f"{BEGIN}\n{table()}\n{END}")
