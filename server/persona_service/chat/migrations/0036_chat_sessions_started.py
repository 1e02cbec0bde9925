"""Chat retention's batches find the sessions past the retention by their start (issue 49): an index on
`chat_sessions (started_at)`. The retention round (`chat.partitions`, hourly once PERSONA_CHAT_RETENTION_DAYS
is set) asks for the sessions started before the oldest month left, by id; with nothing that old (every round
but the one a month ages out in) no index answered it and each of the round's two passes read the whole table
(a sequential scan: 216 ms at 500,000 sessions, 0.14 ms through this index; docs/scaling-out.md). A session's
insert pays one more B-tree entry, at the index's right edge (`started_at` is the insert's now()); the
column never changes, so updates to a session stay HOT. Built CONCURRENTLY, as 0015's.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-02 23:00:00
"""

from alembic import op

revision = '0036'
down_revision = '0035'
branch_labels = None
depends_on = None

NAME = 'ix_chat_sessions_started'


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")  # an INVALID one a failed build left
        op.execute(f"CREATE INDEX CONCURRENTLY {NAME} ON chat_sessions (started_at)")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
