"""portraits; durable tasks

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 10:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('tasks',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('kind', sa.String(length=64), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('subject_id', sa.String(length=64), nullable=False),
    sa.Column('payload', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('status', sa.String(length=12), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('run_after', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_tasks_due', 'tasks', ['run_after'], unique=False, postgresql_where=sa.text("status IN ('queued', 'running')"))
    op.create_index('ix_tasks_org_running', 'tasks', ['org_id'], unique=False, postgresql_where=sa.text("status = 'running'"))
    op.create_index('ix_tasks_finished', 'tasks', ['finished_at'], unique=False, postgresql_where=sa.text('finished_at IS NOT NULL'))
    op.create_table('portraits',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('workspace_id', sa.String(length=40), nullable=False),
    sa.Column('persona_id', sa.String(length=40), nullable=False),
    sa.Column('conversation_id', sa.String(length=40), nullable=False),
    sa.Column('parent_portrait_id', sa.String(length=40), nullable=True),
    sa.Column('instruction', sa.Text(), nullable=False),
    sa.Column('prompt', sa.Text(), nullable=False),
    sa.Column('style', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=12), nullable=False),
    sa.Column('canonical', sa.Boolean(), nullable=False),
    sa.Column('storage_key', sa.Text(), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('width', sa.Integer(), nullable=False),
    sa.Column('height', sa.Integer(), nullable=False),
    sa.Column('failure_code', sa.String(length=40), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['workspace_id'], ['workspaces.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_portraits_persona_created', 'portraits', ['persona_id', 'created_at', 'id'], unique=False)
    op.create_index('ix_portraits_conversation', 'portraits', ['conversation_id'], unique=False)
    op.create_index('ix_portraits_org_created', 'portraits', ['org_id', 'created_at'], unique=False)
    op.create_index('uq_portraits_canonical', 'portraits', ['persona_id'], unique=True, postgresql_where=sa.text('canonical'))


def downgrade() -> None:
    op.drop_table('portraits')
    op.drop_table('tasks')
