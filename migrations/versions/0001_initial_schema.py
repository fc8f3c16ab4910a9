"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-12-02 13:33:34.926794
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('guild_settings',
    sa.Column('guild_id', sa.BigInteger(), nullable=False),
    sa.Column('readout_channel_ids', sa.JSON(), nullable=False),
    sa.Column('xsaid', sa.Boolean(), nullable=False),
    sa.Column('autojoin', sa.Boolean(), nullable=False),
    sa.Column('read_bots', sa.Boolean(), nullable=False),
    sa.Column('require_in_voice', sa.Boolean(), nullable=False),
    sa.Column('required_role_id', sa.BigInteger(), nullable=True),
    sa.Column('max_message_chars', sa.Integer(), nullable=False),
    sa.Column('max_queue', sa.Integer(), nullable=False),
    sa.Column('custom_voices', sa.Boolean(), nullable=False),
    sa.Column('read_spoilers', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('guild_id')
    )
    op.create_table('member_settings',
    sa.Column('guild_id', sa.BigInteger(), nullable=False),
    sa.Column('user_id', sa.BigInteger(), nullable=False),
    sa.Column('nickname', sa.String(length=64), nullable=True),
    sa.PrimaryKeyConstraint('guild_id', 'user_id')
    )
    op.create_table('voices',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('owner_id', sa.BigInteger(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('transcript', sa.Text(), nullable=False),
    sa.Column('clip_flac', sa.LargeBinary(), nullable=False),
    sa.Column('clip_seconds', sa.Float(), nullable=False),
    sa.Column('embedding', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('owner_id', 'name', name='uq_voices_owner_name')
    )
    with op.batch_alter_table('voices', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_voices_owner_id'), ['owner_id'], unique=False)

    op.create_table('user_settings',
    sa.Column('user_id', sa.BigInteger(), nullable=False),
    sa.Column('active_voice_id', sa.String(length=32), nullable=True),
    sa.Column('speed', sa.Float(), nullable=False),
    sa.Column('pitch', sa.Float(), nullable=False),
    sa.Column('opted_out', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['active_voice_id'], ['voices.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('user_id')
    )
    op.create_table('voice_features',
    sa.Column('voice_id', sa.String(length=32), nullable=False),
    sa.Column('backend', sa.String(length=32), nullable=False),
    sa.Column('backend_version', sa.String(length=128), nullable=False),
    sa.Column('blob', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['voice_id'], ['voices.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('voice_id', 'backend', 'backend_version')
    )
    op.create_table('voice_shares',
    sa.Column('voice_id', sa.String(length=32), nullable=False),
    sa.Column('target_kind', sa.String(length=8), nullable=False),
    sa.Column('target_id', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['voice_id'], ['voices.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('voice_id', 'target_kind', 'target_id')
    )
    with op.batch_alter_table('voice_shares', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_voice_shares_target_id'), ['target_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('voice_shares', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_voice_shares_target_id'))

    op.drop_table('voice_shares')
    op.drop_table('voice_features')
    op.drop_table('user_settings')
    with op.batch_alter_table('voices', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_voices_owner_id'))

    op.drop_table('voices')
    op.drop_table('member_settings')
    op.drop_table('guild_settings')
