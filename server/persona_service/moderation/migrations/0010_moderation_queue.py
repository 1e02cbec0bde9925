"""moderation queue: claims and resolutions of review items

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 15:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

_TEXT_COLUMNS = (('claimed_by', sa.String(length=40)), ('decision', sa.String(length=12)), ('note', sa.Text()),
                 ('resolved_by', sa.String(length=40)))


def upgrade() -> None:
    for name, type_ in _TEXT_COLUMNS:
        op.add_column('moderation_reviews', sa.Column(name, type_, server_default='', nullable=False))
        op.alter_column('moderation_reviews', name, server_default=None)
    op.add_column('moderation_reviews', sa.Column('claim_expires_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('moderation_reviews', sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    for name in ('resolved_at', 'claim_expires_at', *(n for n, _ in _TEXT_COLUMNS)):
        op.drop_column('moderation_reviews', name)
