"""Job control: cancellation flag, owning registry instance, status index.

``cancel_requested`` lets a running job be asked to stop; ``owner`` records which
registry instance runs a job so start-up fails only the jobs of dead instances; the
index serves ``GET /v1/jobs?status=...`` newest first.

Revision ID: 0002_job_control
Revises: 0001_initial
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002_job_control"
down_revision: str | None = "0001_initial"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column(
        "jobs",
        sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("jobs", sa.Column("owner", sa.String(64), nullable=True))
    op.create_index("ix_jobs_status_created_at", "jobs", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_jobs_status_created_at", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("owner")
        batch.drop_column("cancel_requested")
