"""privacy exports (DSAR)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23 16:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('privacy_exports',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('user_id', sa.String(length=40), nullable=False),
    sa.Column('status', sa.String(length=12), nullable=False),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('storage_key', sa.Text(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_privacy_exports_user_created', 'privacy_exports', ['org_id', 'user_id', 'created_at', 'id'], unique=False)
    op.create_index('ix_privacy_exports_open', 'privacy_exports', ['created_at'], unique=False, postgresql_where=sa.text("status IN ('pending', 'running')"))
    op.create_index('uq_privacy_exports_open_user', 'privacy_exports', ['org_id', 'user_id'], unique=True, postgresql_where=sa.text("status IN ('pending', 'running')"))


def downgrade() -> None:
    op.drop_table('privacy_exports')
