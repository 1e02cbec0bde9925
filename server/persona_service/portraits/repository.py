from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, func, insert, select, tuple_, update

from persona_service.kernel.api import (
    DECIDES_NOTHING,
    changed_columns,
    declare_aggregate,
    lock_root,
    record,
    record_or_none,
    records,
    row_columns,
    table_of,
)
from persona_service.portraits.records import NewPortrait, PortraitChanges, PortraitRecord
from persona_service.portraits.tables import Portrait

_portraits = table_of(Portrait)

# A portrait: its status and whether it is its persona's canonical one (an edit is a new portrait, the source's
# conversation named in it). A review (approve, reject) locks it first, then decides on its status; an edit holds
# its source FOR SHARE (it must stay generated or approved until the edit commits); the render task's first
# statement is the atomic `UPDATE` of its status. Which portrait of a persona is canonical is decided under a
# lock on the persona's name (`lock_canonical`), taken after the portrait's (a lock by name comes last).
PORTRAIT = declare_aggregate("portrait", _portraits)


class PortraitRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    def add(self, portrait: NewPortrait) -> PortraitRecord:
        stmt = insert(_portraits).values(**row_columns(portrait)).returning(_portraits)
        return record(PortraitRecord, self._conn.execute(stmt).mappings().one())

    def get(self, workspace_id: str, persona_id: str, portrait_id: str, for_update: bool = False,
            share: bool = False) -> PortraitRecord | None:
        """The portrait; `for_update`: locked (`lock_root`: a review starts there); `share`: held FOR SHARE until
        the transaction ends (an edit's source: a review waits for the edit, other edits go on)."""
        where = (_portraits.c.id == portrait_id, _portraits.c.persona_id == persona_id,
                 _portraits.c.workspace_id == workspace_id)
        if for_update:
            return lock_root(self._conn, PORTRAIT, PortraitRecord, *where)
        stmt = select(_portraits).where(*where)
        if share:
            stmt = stmt.with_for_update(read=True)
        return record_or_none(PortraitRecord, self._conn.execute(stmt).mappings().first())

    def by_id(self, portrait_id: str, decides_nothing: bool = False) -> PortraitRecord | None:
        """Any tenant's portrait (for the render task, which has the id from its own queue); `decides_nothing`:
        a read that only answers what is there (a call's answer once its portrait settled)."""
        stmt = select(_portraits).where(_portraits.c.id == portrait_id)
        if decides_nothing:
            stmt = stmt.execution_options(**{DECIDES_NOTHING: True})
        return record_or_none(PortraitRecord, self._conn.execute(stmt).mappings().first())

    def list_page(self, workspace_id: str, persona_id: str, conversation_id: str, limit: int,
                  after: tuple[datetime, str] | None) -> list[PortraitRecord]:
        stmt = select(_portraits).where(_portraits.c.workspace_id == workspace_id,
                                        _portraits.c.persona_id == persona_id)
        if conversation_id:
            stmt = stmt.where(_portraits.c.conversation_id == conversation_id)
        if after is not None:
            stmt = stmt.where(tuple_(_portraits.c.created_at, _portraits.c.id) < tuple_(*after))
        stmt = stmt.order_by(_portraits.c.created_at.desc(), _portraits.c.id.desc()).limit(limit)
        return records(PortraitRecord, self._conn.execute(stmt).mappings())

    def transition(self, portrait_id: str, from_statuses: tuple[str, ...],
                   changes: PortraitChanges) -> PortraitRecord | None:
        """Change the status only from one of `from_statuses` (atomic); None when it was in another."""
        stmt = (
            update(_portraits)
            .where(_portraits.c.id == portrait_id, _portraits.c.status.in_(from_statuses))
            .values(updated_at=func.now(), **changed_columns(changes))
            .returning(_portraits)
        )
        return record_or_none(PortraitRecord, self._conn.execute(stmt).mappings().first())

    def clear_canonical(self, persona_id: str) -> str | None:
        """Unmark the persona's canonical portrait; returns its id."""
        stmt = (update(_portraits).where(_portraits.c.persona_id == persona_id, _portraits.c.canonical)
                .values(canonical=False, updated_at=func.now()).returning(_portraits.c.id))
        return self._conn.execute(stmt).scalar()

    def used_since(self, org_id: str, since: datetime) -> int:
        """Images asked for since `since` that did not fail (the monthly quota's count)."""
        # Counted under the organization's quota lock (`lock_quota`), which orders the count and the insert it
        # allows: the count decides nothing of any one portrait (DECIDES_NOTHING). A render failing meanwhile gives
        # an image back, as when it fails just after.
        stmt = select(func.count()).select_from(_portraits).where(
            _portraits.c.org_id == org_id, _portraits.c.created_at >= since, _portraits.c.status != "failed",
        ).execution_options(**{DECIDES_NOTHING: True})
        return self._conn.execute(stmt).scalar_one()

    def persona_ids(self, limit: int, after: str = "") -> list[str]:
        # Which personas have portraits (the purge's candidates): the purge decides on each persona's existence,
        # which never comes back once purged, and deletes their portraits whatever they are (DECIDES_NOTHING).
        stmt = (select(_portraits.c.persona_id).where(_portraits.c.persona_id > after).distinct()
                .order_by(_portraits.c.persona_id).limit(limit)
                .execution_options(**{DECIDES_NOTHING: True}))
        return list(self._conn.execute(stmt).scalars())

    def delete_for_personas(self, persona_ids: list[str]) -> list[PortraitRecord]:
        stmt = delete(_portraits).where(_portraits.c.persona_id.in_(persona_ids)).returning(_portraits)
        return records(PortraitRecord, self._conn.execute(stmt).mappings())

    def lock_canonical(self, persona_id: str) -> None:
        """Serialize the choice of the persona's canonical portrait until the transaction ends (two approvals of
        two of its portraits: the second clears the first's mark instead of hitting the unique index)."""
        self._conn.execute(select(func.pg_advisory_xact_lock(func.hashtext("portrait-canonical:" + persona_id))))

    def lock_quota(self, org_id: str) -> None:
        """Serialize the quota check of one organization until the transaction ends."""
        self._conn.execute(select(func.pg_advisory_xact_lock(func.hashtext("portrait-quota:" + org_id))))
