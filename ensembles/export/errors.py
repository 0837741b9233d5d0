"""Why an export cannot be served: a part that does not convert, or a missing library."""

from __future__ import annotations

from ensembles.errors import EnsembleError


class ExportError(EnsembleError):
    """The model cannot be exported in the format asked for (a part has no converter, or
    the converted model answers differently); ``problems`` name the part."""

    code = "export_failed"
    title = "Model cannot be exported in this format"


class ExportUnavailableError(EnsembleError):
    """The optional libraries of a format are not installed where the service runs."""

    code = "export_unavailable"
    title = "Export format not installed"
