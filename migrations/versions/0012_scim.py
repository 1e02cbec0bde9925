"""SCIM 2.0 provisioning: users, groups, group members; SCIM tokens (api_keys.purpose);
suspended memberships and memberships narrowed to workspaces

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 15:40:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('api_keys', sa.Column('purpose', sa.String(length=8), server_default='api', nullable=False))
    op.add_column('memberships', sa.Column('suspended_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('memberships', sa.Column('workspace_ids', postgresql.ARRAY(sa.Text()), nullable=True))
    op.create_table('scim_users',
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('user_name', sa.String(length=320), nullable=False),
    sa.Column('external_id', sa.String(length=320), nullable=True),
    sa.Column('display_name', sa.String(length=320), nullable=True),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('document', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['id'], ['users.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('org_id', 'id')
    )
    op.create_index('uq_scim_users_user_name', 'scim_users', ['org_id', sa.text('lower(user_name)')], unique=True)
    op.create_index('ix_scim_users_created', 'scim_users', ['org_id', 'created_at', 'id'], unique=False)
    op.create_index('ix_scim_users_external_id', 'scim_users', ['org_id', 'external_id'], unique=False)
    op.create_table('scim_groups',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.Column('display_name', sa.String(length=320), nullable=False),
    sa.Column('external_id', sa.String(length=320), nullable=True),
    sa.Column('role', sa.String(length=20), nullable=True),
    sa.Column('workspace_id', sa.String(length=40), nullable=True),
    sa.Column('document', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['org_id'], ['organizations.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('uq_scim_groups_display_name', 'scim_groups', ['org_id', sa.text('lower(display_name)')], unique=True)
    op.create_index('ix_scim_groups_created', 'scim_groups', ['org_id', 'created_at', 'id'], unique=False)
    op.create_table('scim_group_members',
    sa.Column('group_id', sa.String(length=40), nullable=False),
    sa.Column('user_id', sa.Text(), nullable=False),
    sa.Column('org_id', sa.String(length=40), nullable=False),
    sa.ForeignKeyConstraint(['group_id'], ['scim_groups.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('group_id', 'user_id')
    )
    op.create_index('ix_scim_group_members_user', 'scim_group_members', ['org_id', 'user_id'], unique=False)


def downgrade() -> None:
    op.drop_table('scim_group_members')
    op.drop_table('scim_groups')
    op.drop_table('scim_users')
    op.drop_column('memberships', 'workspace_ids')
    op.drop_column('memberships', 'suspended_at')
    op.drop_column('api_keys', 'purpose')
