"""billing: processor customers, processor events applied in order

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 14:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('subscriptions', sa.Column('processor_customer_id', sa.String(length=64), server_default='',
                                             nullable=False))
    op.alter_column('subscriptions', 'processor_customer_id', server_default=None)
    op.add_column('invoices', sa.Column('processor_event_at', sa.BigInteger(), server_default='0', nullable=False))
    op.alter_column('invoices', 'processor_event_at', server_default=None)
    op.create_index('ix_invoices_processor_id', 'invoices', ['processor_invoice_id'], unique=False)
    op.create_table('billing_processor_events',
    sa.Column('id', sa.String(length=80), nullable=False),
    sa.Column('type', sa.String(length=80), nullable=False),
    sa.Column('received_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )


def downgrade() -> None:
    op.drop_table('billing_processor_events')
    op.drop_index('ix_invoices_processor_id', table_name='invoices')
    op.drop_column('invoices', 'processor_event_at')
    op.drop_column('subscriptions', 'processor_customer_id')
