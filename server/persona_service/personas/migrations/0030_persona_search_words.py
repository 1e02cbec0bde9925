"""Persona search splits words at punctuation (issue 48): the search
document is the display name, slug and intent with every run of
punctuation and symbols (`[[:punct:]]`, `_` included) made a space, then
`to_tsvector('simple', …)`. PostgreSQL's text-search parser alone keeps
hosts, e-mails, paths, file names and signed integers as one word each, so
`q=poet` missed "A painter/poet", `q=pebble` "jane@pebble.org", and a slug
`agent-007` (read as `agent` and `-007`) was not found by `agent-007`
itself. `[[:punct:]]` holds no letter in any locale (`[^[:alnum:]]` would
take every non-ASCII letter for a separator in a C-locale database).
personas/repository.py SEARCH_DOCUMENT is the same expression (the index
only serves queries that spell it so); regexp_replace and to_tsvector with
a configuration are IMMUTABLE, as an index expression must be.

An expand step: the new index is built CONCURRENTLY beside 0021's
`ix_personas_search`, which the previous release's search walks while the
servers are replaced; it is dropped by a contract step of a later release.
`fastupdate` off, as every GIN index since 0027 (kernel.data.base.trigram_index
says why).

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-10 10:00:00
"""

from alembic import op

revision = '0030'
down_revision = '0029'
branch_labels = None
depends_on = None

NAME = 'ix_personas_search_words'
SEARCH_DOCUMENT = ("to_tsvector('simple'::regconfig, "
                   "regexp_replace(display_name || ' ' || slug || ' ' || intent, '[[:punct:]]+', ' ', 'g'))")


def upgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")  # an INVALID one a failed build left
        op.execute(f"CREATE INDEX CONCURRENTLY {NAME} ON personas USING gin ({SEARCH_DOCUMENT}) "
                   "WITH (fastupdate = off)")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
