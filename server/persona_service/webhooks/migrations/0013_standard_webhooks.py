"""Webhook endpoints may also send the Standard Webhooks headers

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-23 18:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('webhook_endpoints', sa.Column('standard_webhooks', sa.Boolean(), server_default=sa.false(),
                                                 nullable=False))


def downgrade() -> None:
    op.drop_column('webhook_endpoints', 'standard_webhooks')
