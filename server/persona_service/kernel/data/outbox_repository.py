"""The outbox's rows. A transaction's events are held on its connection and written in one INSERT as it
commits (`flush`, run by SQLAlchemy's `commit` event on every engine), not one INSERT each as they are
emitted: a persona creation's three events cost one statement. Their order, ids and times are the
emitter's: the rows go in as emitted, so `seq` follows it. A savepoint rolled back drops the events
emitted in it, as it dropped their rows: a savepoint's beginning writes those held before it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, event, insert, select, tuple_

from persona_service.kernel.data.base import seen_from, table_of
from persona_service.kernel.data.prepared import PreparedRows
from persona_service.kernel.data.records import field_names, record_or_none, records, row_columns
from persona_service.kernel.data.tables import EVENT_PERSONA, OutboxEvent

_events = table_of(OutboxEvent)


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: str
    org_id: str
    workspace_id: str
    type: str
    occurred_at: datetime
    data: dict[str, object]  # the event's JSON object


class EventRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def add(self, event: EventRecord) -> None:
        """The event as it is read back (its `seq` and `dispatched_at` are the log's and the worker's), written
        as the transaction commits; at once where no transaction of SQLAlchemy's will commit it (autocommit)."""
        conn = self.conn
        driver = conn.connection.driver_connection
        if not conn.in_transaction() or getattr(driver, "autocommit", False):
            conn.execute(insert(_events).values(**row_columns(event)))
            return
        conn.info.setdefault(_PENDING, []).append(event)

    def flush(self) -> None:
        """Write the events held so far now (what a commit does first)."""
        flush(self.conn)

    def get(self, org_id: str, workspace_id: str | None, event_id: str) -> EventRecord | None:
        stmt = select(_events).where(_events.c.id == event_id, _events.c.org_id == org_id,
                                     seen_from(_events.c.workspace_id, workspace_id))
        return record_or_none(EventRecord, self.conn.execute(stmt).mappings().first())

    def list_page(
        self, org_id: str, workspace_id: str | None, type_: str, persona_id: str, limit: int,
        after: tuple[datetime, str] | None,
    ) -> list[EventRecord]:
        stmt = select(_events).where(_events.c.org_id == org_id, seen_from(_events.c.workspace_id, workspace_id))
        if type_:
            stmt = stmt.where(_events.c.type == type_)
        if persona_id:
            stmt = stmt.where(EVENT_PERSONA == persona_id)
        if after is not None:
            stmt = stmt.where(tuple_(_events.c.occurred_at, _events.c.id) < tuple_(*after))
        stmt = stmt.order_by(_events.c.occurred_at.desc(), _events.c.id.desc()).limit(limit)
        return records(EventRecord, self.conn.execute(stmt).mappings())


_PENDING = "outbox.pending"  # conn.info: the transaction's events not yet written, in the order emitted
# Compiled once per event count, prepared (SQLAlchemy compiled a list of rows' INSERT again at every commit).
_insert = PreparedRows(_events, field_names(EventRecord))


def flush(conn: Connection) -> None:
    """One INSERT of the events `conn`'s transaction holds."""
    events = conn.info.pop(_PENDING, None)
    if events:
        _insert.run(conn, [row_columns(e) for e in events])


def _forget(conn: Connection, *_: object) -> None:
    """A transaction ended without a commit, or a savepoint rolled back: what it held goes with it (a savepoint
    holds only its own: each flushes what came before it, next). A connection the database dropped holds
    nothing to forget (its info is out of reach; the next transaction's `begin` starts afresh anyway)."""
    if not conn.invalidated:
        conn.info.pop(_PENDING, None)


def _savepoint(conn: Connection, _name: str | None) -> None:
    flush(conn)  # before the SAVEPOINT: the events emitted so far are not the savepoint's to roll back


# On the Engine class: every engine's transactions, the service's, the jobs' and the tests' alike. A released
# savepoint's events are its parent's, held on.
event.listen(Engine, "begin", _forget)
event.listen(Engine, "savepoint", _savepoint)
event.listen(Engine, "rollback_savepoint", _forget)
event.listen(Engine, "commit", flush)
event.listen(Engine, "rollback", _forget)
