"""Chat controls (#41): a reply's alternatives ("swipes"), edits, deletes,
and the API key each reply was billed to, for usage over time.

chat_messages gains `swipe` (the alternative's index in its turn),
`selected` (the alternative the conversation continues from), `edited`,
`deleted_at` (a removed message: its text erased, its usage kept) and
`credential_id`; the turn's uniqueness moves from (session_id, ordinal) to
(session_id, ordinal, swipe). chat_sessions gains `removed_messages`: a
message's ordinal is claimed as message_count + removed_messages, so the
ordinals of removed messages are never reused. The new columns have
constant defaults (no table rewrite); the indexes are built CONCURRENTLY,
as 0015's, then the old constraint is dropped. The usage index covers the
replies of a workspace in time order.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 02:45:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0020'
down_revision = '0019'
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
    op.drop_constraint('uq_chat_messages_session_ordinal', 'chat_messages', type_='unique')


def downgrade() -> None:
    op.create_unique_constraint('uq_chat_messages_session_ordinal', 'chat_messages', ['session_id', 'ordinal'])
    with op.get_context().autocommit_block():
        for name in (TURN, REPLIES):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    op.drop_column('chat_sessions', 'removed_messages')
    for column in ('credential_id', 'deleted_at', 'edited', 'selected', 'swipe'):
        op.drop_column('chat_messages', column)
