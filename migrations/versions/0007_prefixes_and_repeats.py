"""guild settings required_prefix and ignore_prefix ("": off) and repeated_characters (3, the cap it replaces)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07 19:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        batch.add_column(sa.Column("required_prefix", sa.String(length=20), nullable=False, server_default=""))
        batch.add_column(sa.Column("ignore_prefix", sa.String(length=20), nullable=False, server_default=""))
        batch.add_column(sa.Column("repeated_characters", sa.Integer(), nullable=False, server_default="3"))


def downgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        for column in ("repeated_characters", "ignore_prefix", "required_prefix"):
            batch.drop_column(column)
