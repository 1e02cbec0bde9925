"""SCIM `co` served by an index (issue 38): `userName co "x"` (and
displayName's, on users and groups) is `lower(column) LIKE '%x%'`, which read
every user of the organization (p50 144 ms at 100,000 users). A GIN trigram
index (pg_trgm, 0026) per column, on the lowered value the filter compares.
`fastupdate` off (kernel.data.base.trigram_index says why). Built CONCURRENTLY, as 0015's: writers are never blocked; a failed build
leaves an INVALID index, which the upgrade run again drops and rebuilds.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28 09:30:00
"""

from alembic import op

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None

# name -> (table, lowered column)
INDEXES = {
    'ix_scim_users_user_name_trgm': ('scim_users', 'user_name'),
    'ix_scim_users_display_name_trgm': ('scim_users', 'display_name'),
    'ix_scim_groups_display_name_trgm': ('scim_groups', 'display_name'),
}


def upgrade() -> None:
    with op.get_context().autocommit_block():
        for name, (table, column) in INDEXES.items():
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # an INVALID one a failed build left
            op.execute(f"CREATE INDEX CONCURRENTLY {name} ON {table} USING gin (lower({column}) gin_trgm_ops)"
                       " WITH (fastupdate = off)")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
