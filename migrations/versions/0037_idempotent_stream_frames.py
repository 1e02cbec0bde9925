"""A keyed stream's frames, saved with its Idempotency-Key's record once its run ends (sealed by the secret box,
compressed): a replay after Redis let the run's frames go (10 minutes after it ended) is answered from them, for
as long as the key is kept (24 hours; the record's purge removes them).

Expand: a nullable column, added without a rewrite. The previous release neither writes nor resets it: a blob
left on a record it claims again is never served (frames are read and written only under the run id the record
names).

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-03 18:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0037'
down_revision = '0036'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('idempotency_keys', sa.Column('frames', sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    op.drop_column('idempotency_keys', 'frames')
