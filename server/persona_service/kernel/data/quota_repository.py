"""Quota state PostgreSQL keeps: the window monthly quotas count in (and since
when), and the units of Redis-counted quotas that committed calls used."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, and_, case, delete, func, insert, select
from sqlalchemy.dialects.postgresql import insert as upsert

from persona_service.kernel.data.base import table_of
from persona_service.kernel.data.prepared import PreparedInsert
from persona_service.kernel.data.tables import QuotaDraw, QuotaWindow

_windows = table_of(QuotaWindow)
_draws = table_of(QuotaDraw)
_draw = PreparedInsert(insert(_draws), ("org_id", "quota"))  # every generation's (issue 50): compiled once


class QuotaRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def counts_since(self, org_id: str, start: datetime, end: datetime, now: datetime) -> datetime:
        """Since when the organization's quotas count in the window [start, end) in force now. A
        window that replaced one before that one reset (a subscription opened or changed mid-period)
        counts from where that one counted; a window after a reset, from its own start. The window
        is recorded when it changes: the row's lock, held to the end of the transaction, makes
        concurrent first calls of a new window agree. Never earlier than it was: what a reset ended
        is never counted again (and `purge_counted_out` may delete it)."""
        found = self.conn.execute(
            select(_windows.c.starts_at, _windows.c.ends_at, _windows.c.counts_since).where(_windows.c.org_id == org_id)
        ).first()
        if found is not None and (found.starts_at, found.ends_at) == (start, end):
            since: datetime = found.counts_since
            return since
        stmt = upsert(_windows).values(org_id=org_id, starts_at=start, ends_at=end, counts_since=start)
        old = _windows.c
        stmt = stmt.on_conflict_do_update(index_elements=[old.org_id], set_={
            "starts_at": stmt.excluded.starts_at, "ends_at": stmt.excluded.ends_at,
            "counts_since": case(
                (and_(old.starts_at == stmt.excluded.starts_at, old.ends_at == stmt.excluded.ends_at), old.counts_since),
                (old.ends_at > now, old.counts_since),
                else_=stmt.excluded.starts_at,
            ),
        })
        counts_since: datetime = self.conn.execute(stmt.returning(_windows.c.counts_since)).scalar_one()
        return counts_since

    def draw(self, org_id: str, quota: str) -> None:
        """One unit of `quota` used, recorded with the call's changes."""
        _draw.run(self.conn, {"org_id": org_id, "quota": quota})

    def drawn_since(self, org_id: str, quota: str, since: datetime) -> int:
        stmt = select(func.count()).select_from(_draws).where(
            _draws.c.org_id == org_id, _draws.c.quota == quota, _draws.c.drawn_at >= since)
        return self.conn.execute(stmt).scalar_one()

    def purge_counted_out(self, batch: int = 5000) -> int:
        """Delete draws from before their organization's quotas count (a reset ended them for good)."""
        doomed = (select(_draws.c.id).join(_windows, _windows.c.org_id == _draws.c.org_id)
                  .where(_draws.c.drawn_at < _windows.c.counts_since).limit(batch))
        return self.conn.execute(delete(_draws).where(_draws.c.id.in_(doomed))).rowcount
