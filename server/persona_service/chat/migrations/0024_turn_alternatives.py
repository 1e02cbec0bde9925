"""A reply's alternatives share their turn's ordinal (#41): the old
uniqueness of (session_id, ordinal) goes; 0023's unique index on
(session_id, ordinal, swipe) keeps a turn's alternatives apart.

Marked a contract step because it drops a constraint, but nothing any
release runs depends on it: no statement names it (no ON CONFLICT on it),
and dropping a uniqueness rule only allows more, so the previous release
serves on this schema unchanged (scripts/check_online_migration.py).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28 03:10:00
"""

from alembic import op

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None
phase = "contract"


def upgrade() -> None:
    op.drop_constraint('uq_chat_messages_session_ordinal', 'chat_messages', type_='unique')


def downgrade() -> None:
    # Only possible while every turn has one alternative.
    op.create_unique_constraint('uq_chat_messages_session_ordinal', 'chat_messages', ['session_id', 'ordinal'])
