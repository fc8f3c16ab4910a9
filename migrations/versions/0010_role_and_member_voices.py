"""guild settings role_voices (a voice per role) and lock_voice; member_settings.voice (set by a moderator)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07 20:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        batch.add_column(sa.Column("role_voices", sa.String(length=1000), nullable=False, server_default=""))
        batch.add_column(sa.Column("lock_voice", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("member_settings") as batch:
        batch.add_column(sa.Column("voice", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("member_settings") as batch:
        batch.drop_column("voice")
    with op.batch_alter_table("guild_settings") as batch:
        batch.drop_column("lock_voice")
        batch.drop_column("role_voices")
