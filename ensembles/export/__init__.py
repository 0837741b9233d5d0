"""Exports of a fitted model in portable formats: joblib, skops and ONNX.

No HTTP here: the service keeps each export beside its artifact and serves it
(``app/routes/exports.py``). ``onnx`` is converted with skl2onnx and measured against the
stored model on the version's hold-out rows; ``skops`` lists the types a loader must trust.
"""

from ensembles.export.errors import ExportError, ExportUnavailableError
from ensembles.export.exported import FIDELITY, UNTRUSTED_TYPES, Exported
from ensembles.export.formats import COMPUTED, FORMATS, SUFFIXES, ExportFormat, export_model
from ensembles.export.rows import FidelityRows, fidelity_rows

__all__ = [
    "COMPUTED",
    "FIDELITY",
    "FORMATS",
    "SUFFIXES",
    "UNTRUSTED_TYPES",
    "ExportError",
    "ExportFormat",
    "ExportUnavailableError",
    "Exported",
    "FidelityRows",
    "export_model",
    "fidelity_rows",
]
