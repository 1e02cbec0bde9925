"""The marketplace's `q` served by an index (issue 38): each word is
`title ILIKE '%word%' OR description ILIKE '%word%'`, which walked the
published listings newest first and tested each (p99 77.5 ms at 10,000
listings; every listing when a word matches few). A GIN trigram index
(pg_trgm, 0026) on each column; pg_trgm's operator class serves ILIKE as it
is. `fastupdate` off (kernel.data.base.trigram_index says why). Built CONCURRENTLY, as 0015's.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28 09:30:00
"""

from alembic import op

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None

INDEXES = {'ix_listings_title_trgm': 'title', 'ix_listings_description_trgm': 'description'}


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for name, column in INDEXES.items():
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # an INVALID one a failed build left
            op.execute(f"CREATE INDEX CONCURRENTLY {name} ON marketplace_listings USING gin ({column} gin_trgm_ops)"
                       " WITH (fastupdate = off)")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
