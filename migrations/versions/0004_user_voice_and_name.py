"""user settings lend_voice (others may use this user's voice: "Speak in their voice") and name_say_as (/voice name)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("user_settings") as batch:
        batch.add_column(sa.Column("lend_voice", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("name_say_as", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("user_settings") as batch:
        batch.drop_column("name_say_as")
        batch.drop_column("lend_voice")
