from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, func, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from persona_service.kernel.api import (
    Batches,
    declare_aggregate,
    export_batches,
    record,
    record_or_none,
    records,
    table_of,
)
from persona_service.privacy.records import ExportRecord
from persona_service.privacy.tables import PrivacyExport

_exports = table_of(PrivacyExport)
# A privacy export on its own: its request is one INSERT (a second while one is open finds that one), a builder
# claims it with an UPDATE (SKIP LOCKED), an erasure deletes it (kernel.data.aggregates; docs/concurrency.md).
# A request and the erasure are put in one order by the person's membership (every write holds its caller's
# first: kernel.transport.stages.hold).
EXPORT = declare_aggregate("privacy_export", _exports)

# The unique partial index's predicate, written in the statement: bound as parameters, a prepared statement's
# generic plan cannot infer the index from them, and the request answered 500 ("no unique or exclusion constraint
# matching the ON CONFLICT specification") once psycopg had prepared it on a pooled connection (the DSAR build's
# oracle table met it).
_OPEN = text("status IN ('pending', 'running')")

# The oldest pending export, or a running one whose builder's lease lapsed.
_CLAIM = text("""
UPDATE privacy_exports SET status = 'running', lease_until = now() + make_interval(secs => :lease)
WHERE id = (
    SELECT id FROM privacy_exports
    WHERE status = 'pending' OR (status = 'running' AND lease_until < now())
    ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
)
RETURNING *
""")


class PrivacyRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    def request(self, export_id: str, org_id: str, user_id: str) -> ExportRecord:
        """A new pending export, or the user's export already pending or running."""
        insert = pg_insert(_exports).values(id=export_id, org_id=org_id, user_id=user_id).on_conflict_do_nothing(
            index_elements=["org_id", "user_id"], index_where=_OPEN,
        ).returning(_exports)
        made = record_or_none(ExportRecord, self._conn.execute(insert).mappings().first())
        if made is not None:
            return made
        stmt = select(_exports).where(_exports.c.org_id == org_id, _exports.c.user_id == user_id,
                                      _exports.c.status.in_(("pending", "running")))
        return record(ExportRecord, self._conn.execute(stmt).mappings().one())

    def claim(self, lease_seconds: float) -> ExportRecord | None:
        return record_or_none(ExportRecord, self._conn.execute(_CLAIM, {"lease": lease_seconds}).mappings().first())

    def complete(self, export_id: str, storage_key: str, sha256: str, expires_at: datetime) -> None:
        self._conn.execute(update(_exports).where(_exports.c.id == export_id).values(
            status="completed", storage_key=storage_key, sha256=sha256, completed_at=func.now(),
            expires_at=expires_at, lease_until=None))

    def fail(self, export_id: str, error: str) -> None:
        self._conn.execute(update(_exports).where(_exports.c.id == export_id).values(
            status="failed", error=error[:2000], lease_until=None))

    def page(self, org_id: str, user_id: str, limit: int, after: tuple[datetime, str] | None) -> list[ExportRecord]:
        stmt = select(_exports).where(_exports.c.org_id == org_id, _exports.c.user_id == user_id)
        if after is not None:
            stmt = stmt.where(tuple_(_exports.c.created_at, _exports.c.id) < tuple_(*after))
        stmt = stmt.order_by(_exports.c.created_at.desc(), _exports.c.id.desc()).limit(limit)
        return records(ExportRecord, self._conn.execute(stmt).mappings())

    def delete_for(self, org_id: str, user_id: str) -> list[str]:
        """Delete the user's exports; the storage key of each ('' before it was built)."""
        stmt = delete(_exports).where(_exports.c.org_id == org_id, _exports.c.user_id == user_id) \
            .returning(_exports.c.storage_key)
        return list(self._conn.execute(stmt).scalars())

    def personal_data(self, org_id: str, user_id: str) -> dict[str, Batches]:
        stmt = select(_exports).where(_exports.c.org_id == org_id, _exports.c.user_id == user_id) \
            .order_by(_exports.c.created_at)
        return {"privacy_exports": export_batches(self._conn, stmt, omit=("storage_key", "lease_until"))}
