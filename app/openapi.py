"""What the OpenAPI document says that depends on the settings the app runs with.

The document is a promise checked against the server (schemathesis runs every check of
its own over it in ``make test``), so it declares what this app does with these
settings: security only on operations a key guards, and the row limit of a prediction.
"""

from __future__ import annotations

from typing import Any

from app.deps import OPEN_SETTING
from app.settings import Settings

_AUTH_STATUSES = ("401", "403")


def tailor_to_settings(document: dict[str, Any], settings: Settings) -> None:
    """Adjust ``document`` (FastAPI's, in place) to the app's ``settings``."""
    _declare_security(document, settings)
    _declare_row_limit(document, settings.max_predict_rows)


def _declare_security(document: dict[str, Any], settings: Settings) -> None:
    """An open service (no ENSEMBLE_API_KEYS) declares no security at all, and an operation
    opened by its setting (``/metrics`` with ENSEMBLE_OPEN_METRICS) none of its own: a
    client or test reading the document would otherwise expect 401s that never come."""
    guarded = False
    for item in document.get("paths", {}).values():
        for operation in item.values():
            opened_by = operation.pop(OPEN_SETTING, None)
            if not settings.api_keys or (opened_by and getattr(settings, opened_by)):
                operation.pop("security", None)
                for status in _AUTH_STATUSES:
                    operation.get("responses", {}).pop(status, None)
            guarded = guarded or "security" in operation
    if not guarded:
        document.get("components", {}).pop("securitySchemes", None)


def _declare_row_limit(document: dict[str, Any], max_rows: int) -> None:
    """``instances`` holds at most ENSEMBLE_MAX_PREDICT_ROWS rows (more are a 413), as
    records or as the ``data`` of the columnar form."""
    request = document["components"]["schemas"]["PredictRequest"]
    records, columnar = request["properties"]["instances"]["anyOf"]
    records["maxItems"] = max_rows
    columnar["properties"]["data"]["maxItems"] = max_rows
