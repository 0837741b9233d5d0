"""ONNX exports of pipelines with preprocessing: string, boolean and integer columns,
missing values; and what the library does without its optional packages."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnxruntime
import pandas as pd
import pytest

from ensembles.data import select_training_data, table_from_frame
from ensembles.export import ExportError, FidelityRows, export_model
from ensembles.export.onnx_format import MAX_ABS_DIFF, feeds
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble

FOREST = {"kind": "random_forest", "params": {"n_estimators": 5}}


def table(variant: str) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "count": rng.integers(0, 5, n),
            "color": rng.choice(["red", "green", "blue"], n),
        }
    )
    frame["y"] = np.where((frame.x > 0) ^ (frame.color == "red"), "a", "b")
    if variant == "missing numbers":
        frame["x"] = frame.x.mask(rng.random(n) < 0.1)
    if variant == "missing strings":
        frame["color"] = frame.color.mask(rng.random(n) < 0.1)
    if variant == "booleans":
        frame["flag"] = rng.random(n) < 0.5
    return frame


def exported(variant: str, spec: dict[str, object] = FOREST) -> tuple[object, FidelityRows]:
    data = select_training_data(table_from_frame(table(variant)), "y")
    resolved = resolve_ensemble(parse_estimator_spec(spec), data.task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = train(data, resolved, EvaluationSpec(holdout_fraction=0.0, cv_folds=0), 0)
    return fitted.pipeline, FidelityRows(data.X, "dataset")


@pytest.mark.parametrize("variant", ["strings and integers", "missing strings", "booleans"])
def test_the_graph_takes_the_table_column_by_column(variant: str) -> None:
    pipeline, rows = exported(variant)
    graph = export_model(pipeline, "onnx", rows)
    session = onnxruntime.InferenceSession(graph.data, providers=["CPUExecutionProvider"])
    types = {i.name: i.type for i in session.get_inputs()}
    assert types["x"] == "tensor(float)" and types["count"] == "tensor(int64)"
    assert types["color"] == "tensor(string)"
    if variant == "booleans":
        assert types["flag"] == "tensor(string)"  # fed as "True" / "False"
    labels, probabilities = session.run(None, feeds(rows.X, list(types)))
    assert list(labels) == list(pipeline.predict(rows.X))  # type: ignore[attr-defined]
    expected = pipeline.predict_proba(rows.X)  # type: ignore[attr-defined]
    assert np.max(np.abs(probabilities - expected)) <= MAX_ABS_DIFF


def test_an_imputer_with_missing_indicators_is_named() -> None:
    pipeline, rows = exported("missing numbers")
    with pytest.raises(ExportError) as caught:
        export_model(pipeline, "onnx", rows)
    (problem,) = caught.value.problems
    assert problem.loc == ("preprocess", "imputed")
    assert problem.msg == (
        "preprocess.imputed (SimpleImputer): its ONNX graph gives 1 columns where "
        "scikit-learn gives 2"
    )


def test_without_the_optional_packages_the_formats_say_what_to_install() -> None:
    """A fresh interpreter in which the packages cannot be imported (a ``None`` entry in
    ``sys.modules`` is Python's own way to say a module is absent)."""
    script = """
import sys
for name in ("skops", "skops.io", "skl2onnx", "onnxruntime"):
    sys.modules[name] = None
from ensembles.export import ExportUnavailableError, FidelityRows, export_model
import pandas as pd
for fmt in ("skops", "onnx"):
    try:
        export_model(object(), fmt, FidelityRows(pd.DataFrame(), "dataset"))
    except ExportUnavailableError as exc:
        print(exc.code, exc.detail)
print(len(export_model([1, 2], "joblib", None).data) > 0)
"""
    root = Path(__file__).parents[3]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0].startswith("export_unavailable the skops export needs the optional package")
    assert lines[1].startswith("export_unavailable the onnx export needs the optional packages")
    assert all("pip install 'ensemble-service[export]'" in line for line in lines[:2])
    assert lines[2] == "True"  # joblib needs nothing optional
