"""guild setting announce_voice: say "NAME joined" and "NAME left" in the bot's voice channel (off)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07 19:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        batch.add_column(sa.Column("announce_voice", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        batch.drop_column("announce_voice")
