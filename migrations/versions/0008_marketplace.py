"""marketplace: listings, purchases; subscriptions.pending_lines

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 13:30:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('subscriptions', sa.Column('pending_lines', postgresql.JSONB(astext_type=sa.Text()),
                                             server_default=sa.text("'[]'::jsonb"), nullable=False))
    op.alter_column('subscriptions', 'pending_lines', server_default=None)
    op.create_table('marketplace_listings',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('workspace_id', sa.String(length=40), nullable=False),
    sa.Column('persona_id', sa.String(length=40), nullable=False),
    sa.Column('title', sa.String(length=200), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('audience_tags', sa.ARRAY(sa.Text()), nullable=False),
    sa.Column('price_minor', sa.BigInteger(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('rejection_reason', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('published_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['workspace_id'], ['workspaces.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_listings_published', 'marketplace_listings', ['created_at', 'id'], unique=False, postgresql_where=sa.text("status = 'published'"))
    op.create_index('ix_listings_tags', 'marketplace_listings', ['audience_tags'], unique=False, postgresql_using='gin')
    op.create_index('ix_listings_org_created', 'marketplace_listings', ['org_id', 'created_at', 'id'], unique=False)
    op.create_table('marketplace_purchases',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('listing_id', sa.String(length=40), nullable=False),
    sa.Column('buyer_org_id', sa.String(length=40), nullable=False),
    sa.Column('persona_id', sa.String(length=40), nullable=False),
    sa.Column('invoice_id', sa.String(length=40), nullable=False),
    sa.Column('amount_minor', sa.BigInteger(), nullable=False),
    sa.Column('fee_minor', sa.BigInteger(), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['buyer_org_id'], ['organizations.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['listing_id'], ['marketplace_listings.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('listing_id', 'buyer_org_id', name='uq_purchases_listing_buyer')
    )


def downgrade() -> None:
    op.drop_table('marketplace_purchases')
    op.drop_table('marketplace_listings')
    op.drop_column('subscriptions', 'pending_lines')
