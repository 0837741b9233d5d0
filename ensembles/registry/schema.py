"""The registry's tables (SQLAlchemy Core), the single description the code queries.

The database itself is created and upgraded only by the Alembic scripts in
``migrations/``; ``tests/unit/registry/test_migrations.py`` checks that the two agree.

Why the shape:
* ``models.last_version`` is the per-model counter that allocates version numbers. The
  row is kept when a model is deleted (a tombstone), so numbers are never reused.
* ``jobs`` holds the reservation: ``UNIQUE(model, version)`` there makes a duplicate
  number impossible even if the counter logic were wrong.
* ``versions`` holds only *visible* versions (primary key ``(model, version)``); a row
  appears in the same transaction that marks its job succeeded.
* ``instances`` has a row per open registry instance with the end of its lease, which
  its heartbeat keeps pushing back: how processes that share the database but not a
  data folder know which of them are alive (see ``liveness``).
* ``aliases`` reference ``versions`` by a composite foreign key, so an alias can never
  point at a missing version.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(sa.types.TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes in, timezone-aware UTC datetimes out, on every backend.

    SQLite stores no offset, so values are normalised to UTC before storing and tagged
    as UTC when read; Postgres gets a ``timestamptz``.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

datasets = sa.Table(
    "datasets",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(256), nullable=True),
    sa.Column("n_rows", sa.BigInteger, nullable=False),
    sa.Column("n_columns", sa.Integer, nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("columns", sa.JSON, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
)

models = sa.Table(
    "models",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("last_version", sa.Integer, nullable=False),
    sa.Column("created_at", UtcDateTime, nullable=False),
)

versions = sa.Table(
    "versions",
    metadata,
    sa.Column("model", sa.String(128), sa.ForeignKey("models.name"), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("metadata", sa.JSON, nullable=False),
    sa.Column("artifact_sha256", sa.String(64), nullable=False),
    sa.Column("artifact_size", sa.BigInteger, nullable=False),
    sa.Column("artifact_format", sa.String(16), nullable=False),
    sa.Column("job_id", sa.String(32), nullable=True),
)

aliases = sa.Table(
    "aliases",
    metadata,
    sa.Column("model", sa.String(128), primary_key=True),
    sa.Column("alias", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    sa.ForeignKeyConstraint(["model", "version"], ["versions.model", "versions.version"]),
)

# Added by migration 0004 (rollout): the versions of a weighted alias (its ``version``
# above is then the heaviest), and an alias's shadow with its counts since it was set,
# which every process serving it adds to (so any of them can answer for all).
alias_weights = sa.Table(
    "alias_weights",
    metadata,
    sa.Column("model", sa.String(128), primary_key=True),
    sa.Column("alias", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("weight", sa.Float, nullable=False),
    sa.ForeignKeyConstraint(["model", "alias"], ["aliases.model", "aliases.alias"]),
    sa.ForeignKeyConstraint(["model", "version"], ["versions.model", "versions.version"]),
)

alias_shadows = sa.Table(
    "alias_shadows",
    metadata,
    sa.Column("model", sa.String(128), primary_key=True),
    sa.Column("alias", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("epoch", sa.String(32), nullable=False),
    sa.Column("since", UtcDateTime, nullable=False),
    sa.Column("requests", sa.BigInteger, nullable=False),
    sa.Column("rows", sa.BigInteger, nullable=False),
    sa.Column("compared", sa.BigInteger, nullable=False),
    sa.Column("agreements", sa.BigInteger, nullable=False),
    sa.Column("abs_difference", sa.Float, nullable=False),
    sa.Column("errors", sa.BigInteger, nullable=False),
    sa.Column("dropped", sa.BigInteger, nullable=False),
    sa.ForeignKeyConstraint(["model", "alias"], ["aliases.model", "aliases.alias"]),
    sa.ForeignKeyConstraint(["model", "version"], ["versions.model", "versions.version"]),
)

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("model", sa.String(128), sa.ForeignKey("models.name"), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("progress", sa.JSON, nullable=False),
    sa.Column("request", sa.JSON, nullable=False),
    sa.Column("error", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("started_at", UtcDateTime, nullable=True),
    sa.Column("finished_at", UtcDateTime, nullable=True),
    # Added by migration 0002 (job control).
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("owner", sa.String(64), nullable=True),
    sa.UniqueConstraint("model", "version"),
    sa.Index("ix_jobs_status_created_at", "status", "created_at"),
)

instances = sa.Table(
    "instances",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("folder", sa.String(64), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", UtcDateTime, nullable=False),
    sa.Column("heartbeat_at", UtcDateTime, nullable=False),
    sa.Column("expires_at", UtcDateTime, nullable=False),
)
