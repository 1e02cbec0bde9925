"""The transactional outbox: events are rows written in the same transaction
as the change they report (the caller's unit of work)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime, timedelta

from persona.v1 import events_pb2  # noqa: F401 - registers EventType in the descriptor pool

from persona_service.kernel import ids
from persona_service.kernel.clock import utcnow
from persona_service.kernel.data.outbox_repository import EventRecord, EventRepository
from persona_service.kernel.data.work import Work, connection_of
from persona_service.kernel.errors import NotFound
from persona_service.kernel.principal import Principal
from persona_service.kernel.transport.access import log_workspace
from persona_service.kernel.transport.cursors import CursorCodec, keyset_page
from persona_service.kernel.transport.validation import enum_wire_names

# The spec's sixteen event types, from the proto's EventType enum; nothing
# else is ever emitted.
EVENT_TYPES = frozenset(enum_wire_names("persona.v1.EventType"))
AUDIT_FAILED_REASONS = ("audit_below_threshold", "provocation_test_failed", "voice_drift")
# The spec: `persona.audit_failed` has the same schema whatever its `reason`.
# `action` is what followed (`block`, `auto_recover`, `none`); the subject is
# what was judged (`persona` for an audit, the chat session or completion for
# drift).
AUDIT_FAILED_FIELDS = frozenset({"personaId", "reason", "score", "threshold", "action", "subjectType", "subjectId"})
_MS = timedelta(milliseconds=1)


class EventClock:
    """The instants a process stamps events with: milliseconds (the webhook body and GET /v1/events print the
    same instant the same way: docs/contract-decisions.md), each after the process's previous one, so events
    emitted within one millisecond keep their order in GET /v1/events, which breaks ties of `occurred_at` by the
    (random) id. A burst borrows a millisecond or so from the next; a clock set back by more than a second (a
    test's, an NTP step) is followed as it is."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: datetime | None = None

    def stamp(self, now: datetime) -> datetime:
        stamped = now.replace(microsecond=now.microsecond // 1000 * 1000)
        with self._lock:
            last = self._last
            if last is not None and last - timedelta(seconds=1) < stamped <= last:
                stamped = last + _MS
            self._last = stamped
        return stamped


EVENT_CLOCK = EventClock()


class Outbox:
    def __init__(self, work: Work, cursors: CursorCodec | None = None) -> None:
        self._repo = EventRepository(connection_of(work)())
        self.cursors = cursors

    def emit(self, type_: str, org_id: str, workspace_id: str, data: Mapping[str, object]) -> str:
        if type_ not in EVENT_TYPES:
            raise ValueError(f"not an event type: {type_}")
        if type_ == "persona.audit_failed" and data.get("reason") not in AUDIT_FAILED_REASONS:
            raise ValueError(f"persona.audit_failed needs a reason in {AUDIT_FAILED_REASONS}")
        if type_ == "persona.audit_failed" and set(data) != AUDIT_FAILED_FIELDS:
            raise ValueError(f"persona.audit_failed carries exactly {sorted(AUDIT_FAILED_FIELDS)}")
        event_id = ids.new_id("event")
        occurred_at = EVENT_CLOCK.stamp(utcnow())
        self._repo.add(EventRecord(id=event_id, org_id=org_id, workspace_id=workspace_id, type=type_,
                                  occurred_at=occurred_at, data=dict(data)))
        return event_id

    def flush(self) -> None:
        """Write the events emitted so far now (the transaction's commit writes them, in one INSERT)."""
        self._repo.flush()

    def get(self, principal: Principal, event_id: str) -> EventRecord:
        row = self._repo.get(principal.org_id, log_workspace(principal), event_id)
        if row is None:
            raise NotFound("event")
        return row

    def list(self, principal: Principal, type_: str, persona_id: str, limit: int,
             cursor: str) -> tuple[list[EventRecord], str]:
        return keyset_page(
            self.cursors, f"events:{principal.org_id}", limit, cursor,
            lambda n, after: self._repo.list_page(principal.org_id, log_workspace(principal), type_, persona_id, n, after),
            "occurred_at",
        )
