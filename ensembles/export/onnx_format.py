"""``onnx``: the pipeline converted with skl2onnx, measured with onnxruntime before use.

The graph takes the *table*, not a matrix: one input per feature column, in the
version's feature order, each of shape ``[N, 1]``: ``float`` (float32) for float64
columns, ``int64`` for int64 columns, ``string`` for string and boolean columns (booleans
as ``"True"``/``"False"``). Preprocessing (column selection, imputation, encoders) is part
of the graph, as it is part of the stored ``Pipeline``. Input names are the column names
as skl2onnx sanitizes them (characters other than letters, digits and ``_`` become
``_``); the graph's metadata ``ensemble.inputs`` maps each column to its input. Outputs:
``label`` and ``probabilities`` (classification, no ZipMap), ``variable`` (regression).

Fidelity: the graph runs on onnxruntime over the version's hold-out rows
(:mod:`ensembles.export.rows`) and is compared with the stored model: the largest absolute
difference of the probabilities (classification; of the predictions for regression) and
the share of identical labels. Above :data:`MAX_ABS_DIFF`, or when a part has no
converter, ExportError names the part (:mod:`ensembles.export.onnx_parts`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import pandas as pd
from sklearn.pipeline import Pipeline

from ensembles.errors import Problem
from ensembles.export.errors import ExportError, ExportUnavailableError
from ensembles.export.exported import FIDELITY, Exported
from ensembles.export.onnx_converters import register_boosting_converters
from ensembles.export.onnx_parts import (
    Trial,
    adapted,
    column_array,
    failing_part,
    members,
    message,
)
from ensembles.export.rows import FidelityRows

MAX_ABS_DIFF: Final = 1e-4
TARGET_OPSET: Final = {"": 18, "ai.onnx.ml": 3}
INPUTS_METADATA: Final = "ensemble.inputs"


def _libraries() -> tuple[Any, Any]:
    try:
        import onnxruntime
        import skl2onnx
    except ImportError as exc:
        raise ExportUnavailableError(
            "the onnx export needs the optional packages skl2onnx and onnxruntime: pip "
            "install 'ensemble-service[export]'"
        ) from exc
    register_boosting_converters()
    return skl2onnx, onnxruntime


def input_types(X: pd.DataFrame) -> list[tuple[str, Any]]:
    """One ``[N, 1]`` input per column, typed from the model frame's dtype."""
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType, StringTensorType

    types: list[tuple[str, Any]] = []
    for name, dtype in X.dtypes.items():
        if pd.api.types.is_integer_dtype(dtype):
            kind: Any = Int64TensorType
        elif pd.api.types.is_float_dtype(dtype):
            kind = FloatTensorType
        else:
            kind = StringTensorType
        types.append((str(name), kind([None, 1])))
    return types


def feeds(X: pd.DataFrame, names: Sequence[str]) -> dict[str, np.ndarray[Any, Any]]:
    """The table as the graph takes it: column i becomes input ``names[i]``."""
    return {name: column_array(X[c]) for name, c in zip(names, X.columns, strict=True)}


def _convert(skl2onnx: Any, model: Any, inputs: list[tuple[str, Any]]) -> Any:
    options = {id(model): {"zipmap": False}} if hasattr(model, "classes_") else None
    return skl2onnx.convert_sklearn(
        model, initial_types=inputs, target_opset=TARGET_OPSET, options=options
    )


def _session(onnxruntime: Any, graph: Any) -> Any:
    quiet = onnxruntime.SessionOptions()
    quiet.log_severity_level = 4  # fatal only: a failing run is reported as the export's 409
    return onnxruntime.InferenceSession(
        graph.SerializeToString(), quiet, providers=["CPUExecutionProvider"]
    )


def _trial(skl2onnx: Any, onnxruntime: Any) -> Trial:
    """Convert a part and, given arrays, run it: how the locator tests parts alone."""

    def trial(
        part: Any, inputs: list[tuple[str, Any]], arrays: list[np.ndarray[Any, Any]]
    ) -> list[Any]:
        graph = _convert(skl2onnx, part, inputs)
        if not arrays:
            return []
        session = _session(onnxruntime, graph)
        outputs: list[Any] = session.run(
            None, {node.name: a for node, a in zip(session.get_inputs(), arrays, strict=True)}
        )
        return outputs

    return trial


def dumps(model: object, rows: FidelityRows) -> Exported:
    skl2onnx, onnxruntime = _libraries()
    if not isinstance(model, Pipeline):
        raise ExportError(
            "only a scikit-learn Pipeline converts", [Problem(("model",), type(model).__name__)]
        )
    inputs = input_types(rows.X)
    trial = _trial(skl2onnx, onnxruntime)
    try:
        graph = _convert(skl2onnx, adapted(model), inputs)
        session = _session(onnxruntime, graph)
        names = [node.name for node in session.get_inputs()]
        outputs = session.run(None, feeds(rows.X, names))
    except Exception as exc:
        problem = failing_part(model, rows.X, inputs, trial, message(exc))
        raise ExportError(
            f"the model cannot be converted to ONNX: {problem.msg}", [problem]
        ) from exc
    fidelity = measure(model, outputs, rows)
    verdict = _unfaithful(model, fidelity)
    if verdict is not None:
        problem = failing_part(model, rows.X, inputs, trial, verdict)
        raise ExportError(f"the ONNX graph is not faithful: {problem.msg}", [problem])
    mapping = [{"column": str(c), "input": n} for c, n in zip(rows.X.columns, names, strict=True)]
    _describe(graph, {INPUTS_METADATA: json.dumps(mapping), "ensemble.fidelity": fidelity.header})
    return Exported(graph.SerializeToString(), {FIDELITY: fidelity.header})


class Fidelity:
    """How the graph's answers compare with the stored model's on the same rows."""

    def __init__(
        self,
        max_abs_diff: float | None,
        label_agreement: float | None,
        rows: FidelityRows,
        *,
        wrong_shape: bool = False,
    ) -> None:
        self.wrong_shape = wrong_shape
        self.max_abs_diff = max_abs_diff
        self.label_agreement = label_agreement
        self.rows = rows

    @property
    def header(self) -> str:
        parts = [
            f"max_abs_diff={'none' if self.max_abs_diff is None else f'{self.max_abs_diff:.3g}'}"
        ]
        if self.label_agreement is not None:
            parts.append(f"label_agreement={self.label_agreement:.6g}")
        parts += [f"rows={len(self.rows.X)}", f"rows_from={self.rows.source}"]
        return "; ".join(parts)


def measure(model: Pipeline, outputs: Sequence[Any], rows: FidelityRows) -> Fidelity:
    """Largest |difference| of probabilities (or predictions) and label agreement."""
    if len(rows.X) == 0:
        return Fidelity(0.0, 1.0 if hasattr(model, "classes_") else None, rows)
    if not hasattr(model, "classes_"):
        expected = np.asarray(model.predict(rows.X), dtype=np.float64).ravel()
        got = np.asarray(outputs[0], dtype=np.float64).ravel()
        return Fidelity(float(np.max(np.abs(got - expected))), None, rows)
    labels, got_labels = np.asarray(model.predict(rows.X)), np.asarray(outputs[0])
    if got_labels.shape != labels.shape:  # a graph that answers in the wrong shape
        return Fidelity(float("inf"), 0.0, rows, wrong_shape=True)
    agreement = float(np.mean(labels.astype(str) == got_labels.astype(str)))
    if not hasattr(model, "predict_proba"):  # hard voting: labels are all there is
        return Fidelity(None, agreement, rows)
    expected = np.asarray(model.predict_proba(rows.X), dtype=np.float64)
    got = np.asarray(outputs[1], dtype=np.float64)
    if got.shape != expected.shape:
        return Fidelity(float("inf"), agreement, rows, wrong_shape=True)
    return Fidelity(float(np.max(np.abs(got - expected))), agreement, rows)


def _unfaithful(model: Pipeline, fidelity: Fidelity) -> str | None:
    """Why the graph may not stand for the model, or None."""
    ensemble = model.steps[-1][1]
    kinds = sorted({type(m).__name__ for loc, m in members(ensemble, ()) if len(loc) <= 2})
    combination = type(ensemble).__name__ + (f" of {', '.join(kinds)}" if kinds else "")
    if fidelity.wrong_shape:
        return (
            f"the ONNX graph answers in the wrong shape (the converter mishandles "
            f"{combination}); {fidelity.header}"
        )
    if fidelity.max_abs_diff is not None and not fidelity.max_abs_diff <= MAX_ABS_DIFF:
        return (
            f"the ONNX graph differs from the stored model by up to "
            f"{fidelity.max_abs_diff:.3g} (bound {MAX_ABS_DIFF:g}); {fidelity.header}"
        )
    if fidelity.max_abs_diff is None and fidelity.label_agreement != 1.0:
        return f"the ONNX graph's labels differ from the stored model's; {fidelity.header}"
    return None


def _describe(graph: Any, values: dict[str, str]) -> None:
    for key, value in values.items():
        entry = graph.metadata_props.add()
        entry.key, entry.value = key, value


__all__ = ["MAX_ABS_DIFF", "Fidelity", "dumps", "feeds", "input_types", "measure", "message"]
