"""The DSAR export's chat lookup (#32): a user's chat sessions in an
organization (the export, and the erasure, select them by org_id and
user_id; the list indexes of 0015 lead with workspace_id, so the lookup
walked every session of the organization). Built CONCURRENTLY, as 0015's.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25 14:30:00
"""

from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None

NAME = 'ix_chat_sessions_org_user_started'


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")  # an INVALID one a failed build left
        op.execute(f"CREATE INDEX CONCURRENTLY {NAME} ON chat_sessions (org_id, user_id, started_at, id)")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
