"""Alembic environment: runs on the connection the registry passes in.

``SqlRegistry.open`` hands over a connection that already holds the write lock (see
``ensembles.registry.database.upgrade``). The ``alembic`` command line works too: give
``-x url=...`` or set ``sqlalchemy.url``; ``--sql`` prints the DDL for a DBA to review.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from ensembles.registry.schema import metadata


def _configured_url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or context.config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise RuntimeError("no database: pass -x url=... or set sqlalchemy.url")
    return url


def _run(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    if context.is_offline_mode():
        context.configure(url=_configured_url(), target_metadata=metadata, literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = context.config.attributes.get("connection")
    if isinstance(connection, sa.Connection):
        _run(connection)
        return
    engine = sa.create_engine(_configured_url())
    try:
        with engine.begin() as connection:
            _run(connection)
    finally:
        engine.dispose()


_main()
