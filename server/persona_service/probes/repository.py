"""The readiness probe's queries."""

from __future__ import annotations

from sqlalchemy import Connection, text


class ProbeRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def applied_migrations(self, timeout_ms: int) -> set[str]:
        """The migration heads the database is at, given at most `timeout_ms` to answer."""
        self.conn.execute(text(f"SET LOCAL statement_timeout = {int(timeout_ms)}"))
        return set(self.conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
