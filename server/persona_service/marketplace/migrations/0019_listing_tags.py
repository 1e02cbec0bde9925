"""Marketplace search by audience tag in date order (#32): the GIN index on
`audience_tags` finds a tag's listings but not newest first, so a page
sorted every match (or walked the published index and filtered). A row per
listing and tag (`listing_tags`), keyed for a page: a tag's published
listings by (created_at, id), and an organization's own by tag.

Kept by a trigger on marketplace_listings in the transaction of every insert
and of every update of a listing's tags or status (a delete cascades), not by
the application: during a deploy the previous release's servers and review
workers go on writing listings, and the rows they write must be found too.
The trigger is created before the backfill in one transaction: its lock
(SHARE ROW EXCLUSIVE on marketplace_listings, as the foreign key's) holds
listing writers back for the backfill, so none is missed or copied twice.
The table is new, so its indexes are built in that transaction (no one
writes it yet).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 16:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'listing_tags',
        sa.Column('listing_id', sa.String(40), sa.ForeignKey('marketplace_listings.id', ondelete='CASCADE'),
                  primary_key=True),
        sa.Column('tag', sa.Text(), primary_key=True),
        sa.Column('org_id', sa.String(40), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('published', sa.Boolean(), nullable=False),
    )
    op.create_index('ix_listing_tags_published', 'listing_tags', ['tag', 'created_at', 'listing_id'],
                    postgresql_where=sa.text('published'))
    op.create_index('ix_listing_tags_org', 'listing_tags', ['org_id', 'tag', 'created_at', 'listing_id'])
    op.execute("""
        CREATE OR REPLACE FUNCTION marketplace_listing_tags() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'UPDATE' THEN
                IF NEW.audience_tags = OLD.audience_tags AND NEW.status = OLD.status THEN
                    RETURN NEW;
                END IF;
                DELETE FROM listing_tags WHERE listing_id = OLD.id;
            END IF;
            INSERT INTO listing_tags (listing_id, tag, org_id, created_at, published)
            SELECT DISTINCT NEW.id, t, NEW.org_id, NEW.created_at, NEW.status = 'published'
            FROM unnest(NEW.audience_tags) AS t;
            RETURN NEW;
        END $$
    """)
    op.execute("CREATE TRIGGER marketplace_listing_tags AFTER INSERT OR UPDATE OF audience_tags, status "
               "ON marketplace_listings FOR EACH ROW EXECUTE FUNCTION marketplace_listing_tags()")
    op.execute("INSERT INTO listing_tags (listing_id, tag, org_id, created_at, published) "
               "SELECT DISTINCT l.id, t, l.org_id, l.created_at, l.status = 'published' "
               "FROM marketplace_listings l, unnest(l.audience_tags) AS t")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS marketplace_listing_tags ON marketplace_listings")
    op.execute("DROP FUNCTION IF EXISTS marketplace_listing_tags()")
    op.drop_table('listing_tags')
