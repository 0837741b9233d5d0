"""Rollout: weighted aliases and shadows.

``alias_weights`` holds the versions of an alias that splits its traffic by weight (the
alias row keeps pointing at the heaviest, so every reader of one target still has one);
``alias_shadows`` the version that also gets an alias's requests, with the counts every
process adds to since it was set. Both reference their versions, so a version in use
cannot disappear under them.

Revision ID: 0004_rollout
Revises: 0003_instances
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004_rollout"
down_revision: str | None = "0003_instances"
branch_labels: str | None = None
depends_on: str | None = None


def _references(table: str) -> list[sa.ForeignKeyConstraint]:
    return [
        sa.ForeignKeyConstraint(
            ["model", "alias"],
            ["aliases.model", "aliases.alias"],
            name=f"fk_{table}_model_alias_aliases",
        ),
        sa.ForeignKeyConstraint(
            ["model", "version"],
            ["versions.model", "versions.version"],
            name=f"fk_{table}_model_version_versions",
        ),
    ]


def upgrade() -> None:
    op.create_table(
        "alias_weights",
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("alias", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("model", "alias", "version", name="pk_alias_weights"),
        *_references("alias_weights"),
    )
    counter = [
        sa.Column(name, sa.BigInteger(), nullable=False)
        for name in ("requests", "rows", "compared", "agreements")
    ]
    op.create_table(
        "alias_shadows",
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("alias", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.String(32), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        *counter,
        sa.Column("abs_difference", sa.Float(), nullable=False),
        sa.Column("errors", sa.BigInteger(), nullable=False),
        sa.Column("dropped", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("model", "alias", name="pk_alias_shadows"),
        *_references("alias_shadows"),
    )


def downgrade() -> None:
    op.drop_table("alias_shadows")
    op.drop_table("alias_weights")
