"""language settings: a user's (NULL: the server's) and a guild's ("": the bot's own voice's; "auto": detected)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 08:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("user_settings", sa.Column("language", sa.String(length=16), nullable=True))
    op.add_column("guild_settings", sa.Column("language", sa.String(length=16), nullable=False, server_default=""))


def downgrade() -> None:
    for table in ("guild_settings", "user_settings"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("language")
