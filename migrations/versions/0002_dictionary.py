"""per-guild pronunciation dictionary

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dictionary_entries",
        sa.Column("guild_id", sa.BigInteger(), nullable=False),
        sa.Column("word", sa.String(length=64), nullable=False),
        sa.Column("say_as", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("guild_id", "word"),
    )


def downgrade() -> None:
    op.drop_table("dictionary_entries")
