"""Start-up checks of the dependencies the settings name, before any server process.

A wrong ``ENSEMBLE_OBJECT_STORE`` (a missing bucket, an unreachable endpoint, refused
credentials) is a setting to fix, not a crash: :func:`object_store_problem` says so in
one line naming the setting, and the launcher exits 2 with it, as for an invalid value,
instead of starting servers that would answer 500 (or 503) for every upload later.
"""

from __future__ import annotations

from app.settings import Settings
from ensembles.registry.stores.location import redacted


def object_store_problem(settings: Settings) -> str | None:
    """Why the configured object store cannot be used, naming the setting; None if it
    can (or if the store is a local folder, which the registry creates at start)."""
    store = settings.store
    if store.url is None or not store.url.startswith("s3://"):
        return None
    from ensembles.errors import StorageError
    from ensembles.registry.stores import open_store

    try:
        opened = open_store(store, settings.data_dir, "preflight")  # checks the bucket
    except StorageError as exc:
        return _naming(settings, exc.detail)
    try:
        opened.probe()  # and that these credentials may write to it
    except OSError as exc:
        return _naming(settings, f"cannot write to {opened.location}: {exc.strerror or exc}")
    return None


def _naming(settings: Settings, reason: str) -> str:
    endpoint = settings.s3_endpoint_url
    via = f" (ENSEMBLE_S3_ENDPOINT_URL={redacted(endpoint)})" if endpoint else ""
    return f"unusable setting ENSEMBLE_OBJECT_STORE={settings.object_store}{via}: {reason}"
