"""Persona versions you can use, and search and sort on the persona list (#41).

persona_versions gets what a version needs to stand on its own: its voice
fingerprint (a chat pinned to a version compares replies with that
version's voice) and, for a rollback, the version it copies. The columns
are nullable, so adding them rewrites nothing; the current version of each
persona takes its fingerprint from voice_profiles (older versions have
none: reading one falls back to the persona's current fingerprint, see
docs/persona-features.md).

The list's new orders and its search each walk an index: by workspace in
the order's key (updated_at, lower(display_name)), and a GIN index on the
words of the display name, slug and intent (`simple` configuration: no
stemming, no stop words; pg_trgm is not available on every PostgreSQL this
runs on). Built CONCURRENTLY, as 0015's, so writers are never blocked.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 02:45:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None

# The search document; personas/repository.py SEARCH_DOCUMENT is the same expression (the index only serves
# queries that spell it exactly so).
SEARCH_DOCUMENT = "to_tsvector('simple'::regconfig, display_name || ' ' || slug || ' ' || intent)"

INDEXES = {
    'ix_personas_workspace_updated': ('personas USING btree', 'workspace_id, updated_at, id'),
    'ix_personas_workspace_name': ('personas USING btree', 'workspace_id, lower(display_name), id'),
    'ix_personas_search': ('personas USING gin', SEARCH_DOCUMENT),
}


def upgrade() -> None:
    op.add_column('persona_versions', sa.Column('fingerprint', sa.ARRAY(sa.Float()), nullable=True))
    op.add_column('persona_versions', sa.Column('fingerprint_model', sa.String(100), nullable=True))
    op.add_column('persona_versions', sa.Column('source_version', sa.Integer(), nullable=True))
    op.execute("UPDATE persona_versions v SET fingerprint = p.fingerprint, fingerprint_model = p.fingerprint_model "
               "FROM voice_profiles p WHERE p.persona_id = v.persona_id AND p.version = v.version")
    with op.get_context().autocommit_block():
        for name, (table, columns) in INDEXES.items():
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # an INVALID one a failed build left
            op.execute(f"CREATE INDEX CONCURRENTLY {name} ON {table} ({columns})")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    op.drop_column('persona_versions', 'source_version')
    op.drop_column('persona_versions', 'fingerprint_model')
    op.drop_column('persona_versions', 'fingerprint')
