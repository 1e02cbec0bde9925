from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import overload

from sqlalchemy import Connection, RowMapping, func, insert, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from persona_service.billing.records import (
    InvoiceChanges,
    InvoiceRecord,
    LineItem,
    NewInvoice,
    PendingLine,
    SubscriptionChanges,
    SubscriptionRecord,
)
from persona_service.billing.tables import Invoice, ProcessorEvent, Subscription
from persona_service.kernel.api import (
    DECIDES_NOTHING,
    changed_columns,
    declare_aggregate,
    record,
    record_or_none,
    records,
    row_columns,
    table_of,
)

_subs = table_of(Subscription)
_invoices = table_of(Invoice)
_events = table_of(ProcessorEvent)
# An organization's billing: its subscription and its invoices. A plan change, a cancel, a resume, a renewal
# and a processor's event about one of its invoices lock the subscription first (kernel.data.aggregates).
SUBSCRIPTION = declare_aggregate("subscription", _subs, _invoices)


class BillingRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    # --- subscriptions -----------------------------------------------------------------

    def subscription(self, org_id: str, for_update: bool = False) -> SubscriptionRecord | None:
        stmt = select(_subs).where(_subs.c.org_id == org_id)
        if for_update:
            stmt = stmt.with_for_update()
        return record_or_none(SubscriptionRecord, _decoded(self._conn.execute(stmt).mappings().first(), _PENDING))

    def subscription_seen(self, org_id: str) -> SubscriptionRecord | None:
        """The subscription as last committed, for a write that decides nothing on it (its quota's period: a
        renewal moving it at the same moment counts the call in the period it arrived in)."""
        stmt = select(_subs).where(_subs.c.org_id == org_id)
        return record_or_none(SubscriptionRecord, _decoded(self._conn.execute(
            stmt.execution_options(**{DECIDES_NOTHING: True})).mappings().first(), _PENDING))

    def add_subscription(self, org_id: str, plan: str, period_start: datetime, period_end: datetime) -> None:
        # Two first writes at once for an organization the previous release made without one: the second is a no-op.
        stmt = pg_insert(_subs).values(org_id=org_id, plan=plan, current_period_start=period_start,
                                       current_period_end=period_end)
        self._conn.execute(stmt.on_conflict_do_nothing(index_elements=["org_id"]))

    def update_subscription(self, org_id: str, changes: SubscriptionChanges) -> SubscriptionRecord:
        stmt = (update(_subs).where(_subs.c.org_id == org_id)
                .values(updated_at=func.now(), **_stored_changes(changes)).returning(_subs))
        return record(SubscriptionRecord, _decoded(self._conn.execute(stmt).mappings().one(), _PENDING))

    def due_for_renewal(self, now: datetime, limit: int) -> list[SubscriptionRecord]:
        """Subscriptions whose period has ended, locked (others renewing at once skip them)."""
        stmt = (select(_subs).where(_subs.c.current_period_end <= now).order_by(_subs.c.current_period_end)
                .limit(limit).with_for_update(skip_locked=True))
        return records(SubscriptionRecord, (_decoded(row, _PENDING) for row in self._conn.execute(stmt).mappings()))

    # --- invoices ----------------------------------------------------------------------

    def add_invoice(self, new: NewInvoice) -> InvoiceRecord:
        values = {**row_columns(new), _invoices.c.line_items.key: [line.as_json() for line in new.line_items]}
        stmt = insert(_invoices).values(**values).returning(_invoices)
        return record(InvoiceRecord, _decoded(self._conn.execute(stmt).mappings().one(), _LINE_ITEMS))

    def invoice(self, org_id: str, invoice_id: str) -> InvoiceRecord | None:
        stmt = select(_invoices).where(_invoices.c.id == invoice_id, _invoices.c.org_id == org_id)
        return record_or_none(InvoiceRecord, _decoded(self._conn.execute(stmt).mappings().first(), _LINE_ITEMS))

    def update_invoice(self, invoice_id: str, changes: InvoiceChanges) -> InvoiceRecord:
        stmt = (update(_invoices).where(_invoices.c.id == invoice_id).values(**changed_columns(changes))
                .returning(_invoices))
        return record(InvoiceRecord, _decoded(self._conn.execute(stmt).mappings().one(), _LINE_ITEMS))

    def org_of_processor_invoice(self, processor_invoice_id: str) -> str | None:
        """The organization an invoice of the processor belongs to (never changes: nothing is decided on it)."""
        stmt = select(_invoices.c.org_id).where(_invoices.c.processor_invoice_id == processor_invoice_id)
        return self._conn.execute(stmt.execution_options(**{DECIDES_NOTHING: True})).scalar()

    def by_processor_id(self, processor_invoice_id: str) -> InvoiceRecord | None:
        stmt = select(_invoices).where(_invoices.c.processor_invoice_id == processor_invoice_id).with_for_update()
        return record_or_none(InvoiceRecord, _decoded(self._conn.execute(stmt).mappings().first(), _LINE_ITEMS))

    def record_event(self, event_id: str, type_: str) -> bool:
        """False when the event was applied before."""
        stmt = pg_insert(_events).values(id=event_id, type=type_).on_conflict_do_nothing().returning(_events.c.id)
        return self._conn.execute(stmt).first() is not None

    def with_overdue(self, now: datetime, limit: int = 100) -> list[SubscriptionRecord]:
        """Subscriptions with an open invoice past its due date, locked (others collecting at once skip them)."""
        overdue = select(_invoices.c.org_id).where(_invoices.c.status == "open", _invoices.c.due_date <= now)
        stmt = (select(_subs).where(_subs.c.org_id.in_(overdue)).order_by(_subs.c.org_id).limit(limit)
                .with_for_update(skip_locked=True))
        return records(SubscriptionRecord, (_decoded(row, _PENDING) for row in self._conn.execute(stmt).mappings()))

    def overdue(self, org_id: str, now: datetime) -> list[InvoiceRecord]:
        """The organization's open invoices past their due date (its subscription locked first)."""
        stmt = (select(_invoices).where(_invoices.c.org_id == org_id, _invoices.c.status == "open",
                                        _invoices.c.due_date <= now).order_by(_invoices.c.due_date, _invoices.c.id))
        return records(InvoiceRecord, (_decoded(row, _LINE_ITEMS) for row in self._conn.execute(stmt).mappings()))

    def invoices_page(self, org_id: str, limit: int, after: tuple[datetime, str] | None) -> list[InvoiceRecord]:
        stmt = select(_invoices).where(_invoices.c.org_id == org_id)
        if after is not None:
            stmt = stmt.where(tuple_(_invoices.c.created_at, _invoices.c.id) < tuple_(*after))
        stmt = stmt.order_by(_invoices.c.created_at.desc(), _invoices.c.id.desc()).limit(limit)
        return records(InvoiceRecord, (_decoded(row, _LINE_ITEMS) for row in self._conn.execute(stmt).mappings()))


# The JSONB lines as typed records, each way (the columns hold their JSON: LineItem.as_json, PendingLine.as_json).


# (the column's key, its items' decoder)
_PENDING = (_subs.c.pending_lines.key, PendingLine.of_json)
_LINE_ITEMS = (_invoices.c.line_items.key, LineItem.of_json)


@overload
def _decoded(row: RowMapping, lines: tuple[str, Callable[[object], object]]) -> Mapping[str, object]: ...
@overload
def _decoded(row: None, lines: tuple[str, Callable[[object], object]]) -> None: ...
def _decoded(row: RowMapping | None, lines: tuple[str, Callable[[object], object]]) -> Mapping[str, object] | None:
    """A row with its JSON lines (a subscription's pending lines, an invoice's line items) as records."""
    if row is None:
        return None
    key, decode = lines
    return {**row, key: tuple(map(decode, row[key]))}


def _stored_changes(changes: SubscriptionChanges) -> dict[str, object]:
    values = changed_columns(changes)
    if changes.pending_lines is not None:
        values[_subs.c.pending_lines.key] = [line.as_json() for line in changes.pending_lines]
    return values
