"""Usage whose cost is unknown is recorded as such (issue 48): a reply billed while its model had no price
(neither built in nor in PERSONA_MODEL_PRICES) keeps `unpriced`, and its session counts them in
`unpriced_replies`, so a price configured later never makes an earlier reply read as free, and a session's
or a period's cost says when it is a lower bound.

Expand: two columns with constant defaults (no table rewrite on PostgreSQL 11+; the previous release, which
names neither, inserts and updates as before and its rows read as priced). Replies billed before this
migration read as priced: which of them had a price then is not known.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-02 01:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0031'
down_revision = '0030'
branch_labels = None
depends_on = None
phase = "expand"


def upgrade() -> None:
    op.add_column('chat_messages', sa.Column('unpriced', sa.Boolean(), server_default=sa.text('false'),
                                             nullable=False))
    op.add_column('chat_sessions', sa.Column('unpriced_replies', sa.Integer(), server_default='0', nullable=False))


def downgrade() -> None:
    op.drop_column('chat_sessions', 'unpriced_replies')
    op.drop_column('chat_messages', 'unpriced')
