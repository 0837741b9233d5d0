"""``skops``: the pipeline saved with ``skops.io``, loadable without unpickling.

``skops.io.load`` refuses every type it does not trust by default; the types this file
needs beyond skops' own trusted set are listed with it (``UNTRUSTED_TYPES``), so a
consumer can review and pass exactly that list: ``skops.io.load(data, trusted=[...])``.
"""

from __future__ import annotations

from ensembles.errors import Problem
from ensembles.export.errors import ExportError, ExportUnavailableError
from ensembles.export.exported import UNTRUSTED_TYPES, Exported


def dumps(model: object) -> Exported:
    try:
        import skops.io as sio
    except ImportError as exc:
        raise ExportUnavailableError(
            "the skops export needs the optional package skops: pip install "
            "'ensemble-service[export]'"
        ) from exc
    try:
        data = sio.dumps(model)
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise ExportError(
            "skops cannot save this model",
            [Problem(("model",), f"{type(exc).__name__}: {exc}")],
        ) from exc
    untrusted = sio.get_untrusted_types(data=data)
    return Exported(data, {UNTRUSTED_TYPES: ",".join(sorted(untrusted))})
