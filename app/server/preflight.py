"""Start-up checks: is every dependency the settings name reachable, before serving?

``python -m app`` (``make run``, the Docker image) runs :func:`problems` before any
server process starts and exits with status 2 printing one line per problem, each naming
the setting to fix: a registry database that cannot be reached is a configuration error
to report at once, not a traceback of a server process (or N of them) later. Messages
never contain a password: URLs are shown with ``***`` in its place.

Each check is a function of the settings returning a problem or None, one per dependency
a setting can name: the optional extra it needs installed, the registry database, the
object store, the Dask scheduler.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import URL

from app.settings import Settings
from ensembles.registry import database
from ensembles.registry.stores.location import redacted

Check = Callable[[Settings], str | None]
_EXAMPLE_URL: Final = "postgresql+psycopg://user:password@host:5432/db"


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _scrub(text: str, url: URL | None, raw: str | None) -> str:
    """``text`` without the password (nor the raw URL, which may carry one)."""
    if raw:
        text = text.replace(raw, "<the URL>")
    if url is not None and url.password:
        text = text.replace(str(url.password), "***")
    return text


def check_database(settings: Settings) -> str | None:
    """Connect to the database ENSEMBLE_DATABASE_URL names and run ``SELECT 1`` (bounded
    by the connect timeout); the problem, naming the setting, or None.

    The default SQLite file is not checked here: the data folder is the server
    processes' to create (a folder they cannot use stops them with status 3).
    """
    raw = settings.database_url
    if not raw:
        return None
    setting = "ENSEMBLE_DATABASE_URL"
    try:
        url = database.database_url(settings.data_dir, raw)
    except sa.exc.ArgumentError:
        return f"{setting} is not a database URL (e.g. {_EXAMPLE_URL})"
    shown = url.render_as_string(hide_password=True)
    try:
        engine = database.create_engine(url)
    except Exception as exc:  # unknown driver, SQLite file in an unwritable folder, ...
        return _scrub(f"{setting}={shown}: cannot use this database: {_reason(exc)}", url, raw)
    try:
        with engine.connect() as conn:
            conn.execute(sa.select(1)).scalar_one()
    except Exception as exc:
        return _scrub(f"{setting}={shown}: cannot reach the database: {_reason(exc)}", url, raw)
    finally:
        engine.dispose()
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    text = _one_line(str(exc)) or type(exc).__name__
    return text[:300]


def check_object_store(settings: Settings) -> str | None:
    """A bucket ENSEMBLE_OBJECT_STORE names that is missing, unreachable or refuses these
    credentials a write; None for a local folder (the registry creates it at start)."""
    store = settings.store
    if store.url is None or not store.url.startswith("s3://"):
        return None
    from ensembles.errors import StorageError
    from ensembles.registry.stores import open_store

    try:
        opened = open_store(store, settings.data_dir, "preflight")  # checks the bucket
    except StorageError as exc:
        return _naming_store(settings, exc.detail)
    try:
        opened.probe()  # and that these credentials may write to it
    except OSError as exc:
        return _naming_store(settings, f"cannot write to {opened.location}: {exc.strerror or exc}")
    return None


def _naming_store(settings: Settings, reason: str) -> str:
    endpoint = settings.s3_endpoint_url
    via = f" (ENSEMBLE_S3_ENDPOINT_URL={redacted(endpoint)})" if endpoint else ""
    return f"unusable setting ENSEMBLE_OBJECT_STORE={settings.object_store}{via}: {reason}"


def check_scheduler(settings: Settings) -> str | None:
    """The Dask scheduler of ENSEMBLE_DASK_SCHEDULER answers (bounded by a timeout)."""
    if settings.dask_scheduler is None:
        return None
    from app.jobs.cluster import check_reachable

    return check_reachable(settings.dask_scheduler)


# setting -> (is it set to use the feature, the module it imports, the extra providing it)
EXTRAS: Final[dict[str, tuple[Callable[[Settings], bool], str, str]]] = {
    "ENSEMBLE_DATABASE_URL": (
        lambda s: (s.database_url or "").startswith("postgresql+psycopg:"),
        "psycopg",
        "postgres",
    ),
    "ENSEMBLE_OBJECT_STORE": (
        lambda s: (s.store.url or "").startswith("s3://"),
        "boto3",
        "s3",
    ),
    "ENSEMBLE_DASK_SCHEDULER": (lambda s: s.dask_scheduler is not None, "distributed", "dask"),
}


def missing_extra(setting: str, module: str, extra: str) -> str | None:
    """The problem of a setting whose optional extra is not installed, or None.

    `make run` installs the service without the optional extras (most users need none of
    them), so a setting that needs one says which, instead of an ImportError later."""
    if importlib.util.find_spec(module) is not None:
        return None
    return (
        f"{setting} needs the '{extra}' extra, which is not installed: "
        f"pip install -e '.[{extra}]' (or: pip install 'ensemble-service[{extra}]')"
    )


def check_extras(settings: Settings) -> str | None:
    """The first setting that needs an optional extra not installed, or None."""
    for setting, (wanted, module, extra) in EXTRAS.items():
        if wanted(settings) and (problem := missing_extra(setting, module, extra)):
            return problem
    return None


CHECKS: Final[tuple[Check, ...]] = (check_database, check_object_store, check_scheduler)


def problems(settings: Settings) -> list[str]:
    """One line per unreachable dependency (empty: all reachable); a missing extra first,
    and alone (the check of what it would have reached could only fail on the import)."""
    if problem := check_extras(settings):
        return [problem]
    found = (check(settings) for check in CHECKS)
    return [problem for problem in found if problem is not None]
