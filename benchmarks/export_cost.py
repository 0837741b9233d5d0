"""What an export costs once (it is kept afterwards): the time to make skops and ONNX
files of random forests, their sizes, and the measured ONNX fidelity.

    PYTHONPATH=. python benchmarks/export_cost.py
"""

from __future__ import annotations

import time
import warnings

from ensembles.export import FidelityRows, export_model
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.splits import split_rows
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

CASES = (("wine", 100), ("breast_cancer", 300))


def main() -> None:
    warnings.simplefilter("ignore")
    print("dataset        trees  format   seconds      bytes  facts")
    for dataset, trees in CASES:
        data = training_data(dataset)
        raw = {"kind": "random_forest", "params": {"n_estimators": trees}}
        spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
        model = train(data, spec, EvaluationSpec(holdout_fraction=0.2, cv_folds=0), 0).pipeline
        split = split_rows(data.y, data.task, 0.2, 0)
        assert split.holdout is not None
        rows = FidelityRows(data.X.iloc[split.holdout], "holdout")
        for fmt in ("skops", "onnx"):
            started = time.perf_counter()
            exported = export_model(model, fmt, rows)  # type: ignore[arg-type]
            seconds = time.perf_counter() - started
            facts = "; ".join(exported.info.values())
            size = len(exported.data)
            print(f"{dataset:<14} {trees:>5}  {fmt:<6} {seconds:>8.2f} {size:>10}  {facts}")


if __name__ == "__main__":
    main()
