"""Initial schema: datasets, models (version counters), versions, aliases, jobs.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(256), nullable=True),
        sa.Column("n_rows", sa.BigInteger(), nullable=False),
        sa.Column("n_columns", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("columns", sa.JSON(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_datasets"),
    )
    op.create_table(
        "models",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("last_version", sa.Integer(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_models"),
    )
    op.create_table(
        "versions",
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("artifact_sha256", sa.String(64), nullable=False),
        sa.Column("artifact_size", sa.BigInteger(), nullable=False),
        sa.Column("artifact_format", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("model", "version", name="pk_versions"),
        sa.ForeignKeyConstraint(["model"], ["models.name"], name="fk_versions_model_models"),
    )
    op.create_table(
        "aliases",
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("alias", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("model", "alias", name="pk_aliases"),
        sa.ForeignKeyConstraint(
            ["model", "version"],
            ["versions.model", "versions.version"],
            name="fk_aliases_model_version_versions",
        ),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("progress", sa.JSON(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("error", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("started_at", _utc(), nullable=True),
        sa.Column("finished_at", _utc(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.ForeignKeyConstraint(["model"], ["models.name"], name="fk_jobs_model_models"),
        sa.UniqueConstraint("model", "version", name="uq_jobs_model_version"),
    )


def downgrade() -> None:
    for table in ("jobs", "aliases", "versions", "models", "datasets"):
        op.drop_table(table)
