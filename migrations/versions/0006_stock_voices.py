"""stock voices: a user's chosen stock voice (NULL: none) and a guild's voice per language ("en=am_michael ja=jf_alpha")

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("user_settings", sa.Column("stock_voice", sa.String(length=32), nullable=True))
    op.add_column("guild_settings", sa.Column("voices", sa.String(length=400), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        batch.drop_column("voices")
    with op.batch_alter_table("user_settings") as batch:
        batch.drop_column("stock_voice")
