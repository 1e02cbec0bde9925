"""Chat controls (#41): a reply's alternatives ("swipes"), edits, deletes,
and the API key each reply was billed to, for usage over time.

chat_messages gains `swipe` (the alternative's index in its turn),
`selected` (the alternative the conversation continues from), `edited`,
`deleted_at` (a removed message: its text erased, its usage kept) and
`credential_id`; a turn is unique on (session_id, ordinal, swipe) (0024
drops the old (session_id, ordinal) constraint). chat_sessions gains
`removed_messages`: a message's ordinal is claimed as message_count +
removed_messages, so the ordinals of removed messages are never reused. The
new columns have constant defaults (no table rewrite) and the previous
release writes rows that read as a turn's only, chosen alternative; the
indexes are built CONCURRENTLY, as 0015's. The usage index covers the
replies of a workspace in time order.

During the deploy, the previous release claims ordinals as message_count
alone: in a session where the new release has already removed messages, its
send meets the (session_id, ordinal, swipe) index and fails (500) until the
servers are replaced; sessions without removals are unaffected.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 02:45:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None

TURN = 'uq_chat_messages_session_ordinal_swipe'
REPLIES = 'ix_chat_messages_workspace_replies'


def upgrade() -> None:
    op.add_column('chat_messages', sa.Column('swipe', sa.Integer(), nullable=False, server_default='0'))
    op.add_column('chat_messages', sa.Column('selected', sa.Boolean(), nullable=False, server_default=sa.true()))
    op.add_column('chat_messages', sa.Column('edited', sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column('chat_messages', sa.Column('deleted_at', sa.DateTime(timezone=True)))
    op.add_column('chat_messages', sa.Column('credential_id', sa.String(80), nullable=False, server_default=''))
    op.add_column('chat_sessions', sa.Column('removed_messages', sa.Integer(), nullable=False, server_default='0'))
    with op.get_context().autocommit_block():
        for name in (TURN, REPLIES):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # an INVALID one a failed build left
        op.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {TURN} ON chat_messages (session_id, ordinal, swipe)")
        op.execute(f"CREATE INDEX CONCURRENTLY {REPLIES} ON chat_messages (workspace_id, created_at) "
                   "WHERE role = 'assistant'")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in (TURN, REPLIES):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    op.drop_column('chat_sessions', 'removed_messages')
    for column in ('credential_id', 'deleted_at', 'edited', 'selected', 'swipe'):
        op.drop_column('chat_messages', column)
