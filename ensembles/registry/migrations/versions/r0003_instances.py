"""Registry instances: who is alive, for processes that share a database, not a folder.

A row per open registry instance, refreshed by a heartbeat until it closes:
``expires_at`` is the end of its lease, after which other instances may fail its jobs
and sweep its files. ``folder`` identifies its data folder, so instances of one folder
keep judging each other by their lock files (exact) rather than by the lease.

Revision ID: 0003_instances
Revises: 0002_job_control
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003_instances"
down_revision: str | None = "0002_job_control"
branch_labels: str | None = None
depends_on: str | None = None


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "instances",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("folder", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", _utc(), nullable=False),
        sa.Column("heartbeat_at", _utc(), nullable=False),
        sa.Column("expires_at", _utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_instances"),
    )


def downgrade() -> None:
    op.drop_table("instances")
