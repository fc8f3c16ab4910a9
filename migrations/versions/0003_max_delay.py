"""guild setting max_delay: how long a readout message may wait before it is skipped to catch up

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 07:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        batch.add_column(sa.Column("max_delay", sa.Integer(), nullable=False, server_default="30"))


def downgrade() -> None:
    with op.batch_alter_table("guild_settings") as batch:
        batch.drop_column("max_delay")
