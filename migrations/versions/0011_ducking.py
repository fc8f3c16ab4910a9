"""guild setting ducking: dB the bot's level falls while a member speaks in its call (10; 0 is off)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07 20:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        batch.add_column(sa.Column("ducking", sa.Integer(), nullable=False, server_default="10"))


def downgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        batch.drop_column("ducking")
