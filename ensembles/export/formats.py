"""The one entry point: a fitted model and a format name in, an :class:`Exported` out."""

from __future__ import annotations

from typing import Final, Literal, get_args

from ensembles.export import joblib_format, onnx_format, skops_format
from ensembles.export.exported import Exported
from ensembles.export.rows import FidelityRows

ExportFormat = Literal["joblib", "skops", "onnx"]
FORMATS: Final[tuple[str, ...]] = get_args(ExportFormat)
COMPUTED: Final = frozenset({"skops", "onnx"})
"""Formats made from the artifact (and kept beside it); ``joblib`` *is* the artifact."""
SUFFIXES: Final = {"joblib": "joblib", "skops": "skops", "onnx": "onnx"}


def export_model(model: object, fmt: ExportFormat, rows: FidelityRows | None) -> Exported:
    """``model`` in ``fmt``; ``onnx`` needs the rows its fidelity is measured on.

    Blocks for as long as the conversion and the measurement take: call it from a worker
    thread. ExportError names the part that fails; ExportUnavailableError the missing
    optional library.
    """
    if fmt == "joblib":
        return joblib_format.dumps(model)
    if fmt == "skops":
        return skops_format.dumps(model)
    if rows is None:
        raise ValueError("the onnx export measures its fidelity on rows: pass them")
    return onnx_format.dumps(model, rows)
