"""A chat session pinned to a persona version (#41): `persona_version`,
NULL for a session that follows the persona's current version (every
session before this revision). Nullable, so adding it rewrites nothing.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 02:50:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('chat_sessions', sa.Column('persona_version', sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column('chat_sessions', 'persona_version')
