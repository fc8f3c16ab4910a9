"""pronunciations per user (user_dictionary_entries) and per-guild pattern entries (dictionary_patterns)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07 20:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_dictionary_entries",
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("word", sa.String(length=64), nullable=False),
        sa.Column("say_as", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "word"),
    )
    op.create_table(
        "dictionary_patterns",
        sa.Column("guild_id", sa.BigInteger(), nullable=False),
        sa.Column("pattern", sa.String(length=200), nullable=False),
        sa.Column("say_as", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("guild_id", "pattern"),
    )


def downgrade() -> None:
    op.drop_table("dictionary_patterns")
    op.drop_table("user_dictionary_entries")
