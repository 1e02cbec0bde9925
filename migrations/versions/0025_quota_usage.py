"""Quotas that survive Redis and window changes (issue 38): `quota_windows`
records the window an organization's monthly quotas count in and since when
(a window that replaced another before it reset counts from the other's
start), and `quota_draws` holds one row per unit of a Redis-counted quota a
committed call used, so a counter Redis lost is rebuilt from it.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28 06:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'quota_windows',
        sa.Column('org_id', sa.String(40), primary_key=True),
        sa.Column('starts_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('ends_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('counts_since', sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        'quota_draws',
        sa.Column('id', sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column('org_id', sa.String(40), nullable=False),
        sa.Column('quota', sa.String(40), nullable=False),
        sa.Column('drawn_at', sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index('ix_quota_draws_org_quota_drawn_at', 'quota_draws', ['org_id', 'quota', 'drawn_at'])


def downgrade() -> None:
    op.drop_table('quota_draws')
    op.drop_table('quota_windows')
