"""SCIM `totalResults` without a filter (#32): a count per organization of its
SCIM users, kept by a trigger in the transaction of every insert and delete
(whatever deletes them: the API, the erasure, an organization's cascade), so
listing the users reads one row instead of counting 100,000. The trigger is
created before the backfill in one transaction: its lock holds writers back
for the count, so none is missed or counted twice.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25 15:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'scim_user_counts',
        sa.Column('org_id', sa.String(40), sa.ForeignKey('organizations.id', ondelete='CASCADE'), primary_key=True),
        sa.Column('total', sa.Integer(), nullable=False),
    )
    op.execute("""
        CREATE OR REPLACE FUNCTION scim_users_count() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO scim_user_counts (org_id, total) VALUES (NEW.org_id, 1)
                ON CONFLICT (org_id) DO UPDATE SET total = scim_user_counts.total + 1;
                RETURN NEW;
            END IF;
            UPDATE scim_user_counts SET total = total - 1 WHERE org_id = OLD.org_id;
            RETURN OLD;
        END $$
    """)
    op.execute("CREATE TRIGGER scim_users_count AFTER INSERT OR DELETE ON scim_users "
               "FOR EACH ROW EXECUTE FUNCTION scim_users_count()")
    op.execute("INSERT INTO scim_user_counts (org_id, total) SELECT org_id, count(*) FROM scim_users GROUP BY org_id")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS scim_users_count ON scim_users")
    op.execute("DROP FUNCTION IF EXISTS scim_users_count()")
    op.drop_table('scim_user_counts')
