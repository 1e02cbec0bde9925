"""Subscriptions and invoices. Services never commit; the renewal job and
the RPCs each run one in their own unit of work."""

from __future__ import annotations

import builtins
import calendar
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from persona_service.billing.pdf import render_invoice
from persona_service.billing.processor import PaymentProcessor
from persona_service.billing.records import (
    CURRENCY,
    PLAN_ORDER,
    PRICES_MINOR,
    InvoiceChanges,
    InvoiceRecord,
    LineItem,
    NewInvoice,
    PendingLine,
    SubscriptionChanges,
    SubscriptionRecord,
)
from persona_service.billing.repository import BillingRepository
from persona_service.files.api import SignedUrl, Storage, object_key
from persona_service.kernel.api import (
    ApiError,
    AuditEntry,
    AuditLog,
    CursorCodec,
    NotFound,
    Outbox,
    Principal,
    StateConflict,
    Work,
    iso,
    keyset_page,
    new_id,
    utcnow,
)
from persona_service.orgs.api import OrgDirectory

PDF_URL_SECONDS = 30
# Processor webhook events and the invoice status each sets.
PROCESSOR_EVENT_STATUS = {"invoice.paid": "paid", "invoice.payment_failed": "open",
                          "invoice.marked_uncollectible": "uncollectible", "invoice.voided": "void"}
PAYMENT_TERMS = timedelta(days=14)


class AssetExpired(ApiError):
    code = "asset_expired"


def add_month(moment: datetime) -> datetime:
    """The same day and time next month (the last day when it has fewer days)."""
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return moment.replace(year=year, month=month, day=min(moment.day, calendar.monthrange(year, month)[1]))


def period_at(sub: SubscriptionRecord, now: datetime) -> tuple[datetime, datetime]:
    """The billing period holding `now`: the current one, or, when it ended
    and the renewal job has not run yet, the one renewal will start."""
    start, end = sub.current_period_start, sub.current_period_end
    while end <= now:  # periods missed while nothing ran are skipped, not billed
        start, end = end, add_month(end)
    return start, end


def billing_period(work: Work, org_id: str, now: datetime) -> tuple[datetime, datetime] | None:
    """The kernel's billing-period port: the organization's period holding
    `now` (quotas reset at its end), or None before it has a subscription."""
    sub = work.of(BillingRepository).subscription_seen(org_id)
    return None if sub is None else period_at(sub, now)


def prorate(amount_minor: int, seconds_left: float, seconds_total: float) -> int:
    """amount × left ÷ total in integers, rounded half up (away from zero for credits)."""
    left, total = max(0, int(seconds_left)), max(1, int(seconds_total))
    sign = -1 if amount_minor < 0 else 1
    return sign * ((abs(amount_minor) * left * 2 + total) // (2 * total))


class BillingService:
    def __init__(self, work: Work, processor: PaymentProcessor, storage: Storage, *,
                 cursors: CursorCodec | None = None, clock: Callable[[], datetime] = utcnow) -> None:
        self.work = work
        self._repo = work.of(BillingRepository)
        self.orgs = OrgDirectory(work)
        self.outbox = Outbox(work)
        self.processor = processor
        self.storage = storage
        self.cursors = cursors
        self.clock = clock

    # --- subscriptions -----------------------------------------------------------------

    def subscription(self, org_id: str, for_update: bool = False) -> SubscriptionRecord:
        """The organization's subscription, opened with the organization (`open_subscription`). An organization
        the previous release made during a deploy's rollout may have none yet: it reads as it will open (on the
        organization's plan, in monthly periods from its creation), and a write (`for_update`) opens it so. A read
        never writes."""
        sub = self._repo.subscription(org_id, for_update)
        if sub is not None:
            return sub
        org = self.orgs.get(org_id)
        if org is None:
            raise NotFound("organization")
        from_creation = SubscriptionRecord(org_id, org.plan, "active", org.created_at, add_month(org.created_at),
                                           False, 0, 0, (), "")
        start, end = period_at(from_creation, self.clock())
        if not for_update:
            return replace(from_creation, current_period_start=start, current_period_end=end)
        self._repo.add_subscription(org_id, org.plan, start, end)
        opened = self._repo.subscription(org_id, for_update)
        assert opened is not None
        return opened

    def change(self, principal: Principal, plan: str) -> SubscriptionRecord:
        sub = self.subscription(principal.org_id, for_update=True)
        if plan == sub.plan:
            return sub
        now = self.clock()
        difference = prorate(PRICES_MINOR[plan] - PRICES_MINOR[sub.plan],
                             (sub.current_period_end - now).total_seconds(),
                             (sub.current_period_end - sub.current_period_start).total_seconds())
        upgrade = PLAN_ORDER.index(plan) > PLAN_ORDER.index(sub.plan)
        credit = sub.credit_minor
        if upgrade and difference > 0:
            self._invoice(sub, "proration", now, sub.current_period_end, [LineItem(
                f"Proration: {sub.plan} -> {plan}", 1, difference, now, sub.current_period_end, proration=True)])
        elif not upgrade:
            credit += -difference  # the unused part of the dearer plan, off the next renewal
        self.orgs.set_plan(principal.org_id, plan)
        changed = self._repo.update_subscription(
            principal.org_id, SubscriptionChanges(plan=plan, cancel_at_period_end=False, credit_minor=credit))
        self._emit(changed, "subscription.upgraded" if upgrade else "subscription.downgraded",
                   {"from": sub.plan, "to": plan, "effectiveAt": iso(now)})
        return changed

    def cancel(self, principal: Principal) -> SubscriptionRecord:
        sub = self.subscription(principal.org_id, for_update=True)
        if sub.plan == "free":
            raise StateConflict("A free subscription has nothing to cancel.", "plan", {"plan": "free"})
        if sub.cancel_at_period_end:
            return sub
        cancelled = self._repo.update_subscription(principal.org_id, SubscriptionChanges(cancel_at_period_end=True))
        self._emit(cancelled, "subscription.cancelled",
                   {"plan": sub.plan, "effectiveAt": iso(sub.current_period_end)})
        return cancelled

    def resume(self, principal: Principal) -> SubscriptionRecord:
        sub = self.subscription(principal.org_id, for_update=True)
        if not sub.cancel_at_period_end:
            return sub
        return self._repo.update_subscription(principal.org_id, SubscriptionChanges(cancel_at_period_end=False))

    def renew_due(self, limit: int = 100) -> builtins.list[SubscriptionRecord]:
        """Start the next period of every subscription whose period ended (a
        cancelled one falls to `free`), each with its renewal invoice. Rows are
        locked and skipped by concurrent renewers; a period renews once.
        Returns the subscriptions as they were before."""
        now = self.clock()
        renewed = []
        for sub in self._repo.due_for_renewal(now, limit):
            plan = "free" if sub.cancel_at_period_end else sub.plan
            start, end = period_at(sub, now)
            if plan != sub.plan:
                self.orgs.set_plan(sub.org_id, plan)
                self._emit(sub, "subscription.downgraded",
                           {"from": sub.plan, "to": plan, "effectiveAt": iso(start), "reason": "cancelled"})
            price = PRICES_MINOR[plan]
            credit = min(sub.credit_minor, price)
            lines = [LineItem(f"{plan.title()} plan", 1, price, start, end)] if price else []
            if credit:
                lines.append(LineItem("Credit from plan changes", 1, -credit, start, end, proration=True))
            lines += [LineItem(p.description, 1, p.amount_minor, start, end) for p in sub.pending_lines]
            carried = max(0, -sum(line.amount_minor for line in lines))  # payouts beyond the charges
            if carried:
                lines.append(LineItem("Credit carried to the next period", 1, carried, start, end))
            current = self._repo.update_subscription(sub.org_id, SubscriptionChanges(
                plan=plan, current_period_start=start, current_period_end=end, cancel_at_period_end=False,
                credit_minor=sub.credit_minor - credit + carried, pending_lines=()))
            if lines:
                self._invoice(current, "renewal", start, end, lines)
            self._audit(sub.org_id, "subscription.renew", "subscription", sub.org_id,
                        {"from": sub.plan, "to": plan, "periodStart": iso(start), "periodEnd": iso(end)})
            renewed.append(sub)
        return renewed

    def charge(self, org_id: str, description: str, amount_minor: int) -> InvoiceRecord:
        """Invoice and charge a one-off amount now (a marketplace purchase)."""
        sub = self.subscription(org_id, for_update=True)
        now = self.clock()
        return self._invoice(sub, "purchase", now, now, [LineItem(description, 1, amount_minor, now, now)])

    def add_to_next_invoice(self, org_id: str, description: str, amount_minor: int) -> None:
        """A line for the next renewal invoice (negative: owed to the organization)."""
        sub = self.subscription(org_id, for_update=True)
        self._repo.update_subscription(org_id, SubscriptionChanges(pending_lines=(
            *sub.pending_lines, PendingLine(description, amount_minor))))

    # --- invoices ----------------------------------------------------------------------

    def invoices(self, principal: Principal, cursor: str, limit: int) -> tuple[list[InvoiceRecord], str]:
        return keyset_page(
            self.cursors, f"invoices:{principal.org_id}", limit, cursor,
            lambda n, after: self._repo.invoices_page(principal.org_id, n, after), "created_at",
        )

    def invoice(self, principal: Principal, invoice_id: str) -> InvoiceRecord:
        row = self._repo.invoice(principal.org_id, invoice_id)
        if row is None:
            raise NotFound("invoice")
        return row

    def pdf_link(self, principal: Principal, invoice_id: str) -> SignedUrl:
        """Where the invoice's PDF is now: the processor's own URL, fetched
        fresh, or a 30-second signed URL of the one this service rendered."""
        row = self.invoice(principal, invoice_id)
        now = self.clock()
        gone = AssetExpired("The invoice's PDF is no longer kept by the payment processor.", {"invoiceId": row.id})
        if self.processor.hosts_pdfs:
            url = self.processor.pdf_url(row.processor_invoice_id)
            if url is None:
                raise gone
            return SignedUrl(url, now + timedelta(seconds=PDF_URL_SECONDS))
        if not row.pdf_key or not self.processor.keeps_pdf(row.period_end, now):
            raise gone
        return self.storage.signed_url(row.pdf_key, PDF_URL_SECONDS)

    def apply_processor_event(self, event_id: str, type_: str, created: int, processor_invoice_id: str,
                              amount_paid_minor: int) -> bool:
        """A processor webhook event: applied once (its id), in order (an
        event older than the last one applied to the invoice is ignored).
        Returns whether it changed anything."""
        if not self._repo.record_event(event_id, type_):
            return False  # a redelivery
        status = PROCESSOR_EVENT_STATUS.get(type_)
        org_id = self._repo.org_of_processor_invoice(processor_invoice_id)
        if org_id is not None:
            self._repo.subscription(org_id, for_update=True)  # the invoice's aggregate first, then the invoice
        row = self._repo.by_processor_id(processor_invoice_id)
        if status is None or row is None or created < row.processor_event_at:
            return False
        now = self.clock()
        paid = status == "paid"
        row = self._repo.update_invoice(row.id, InvoiceChanges(
            status=status, processor_event_at=created, version=row.version + 1,
            amount_paid_minor=amount_paid_minor if paid else None, paid_at=(row.paid_at or now) if paid else None))
        self._repo.update_subscription(row.org_id, SubscriptionChanges(status="active" if paid else "past_due"))
        self._render(row)
        self._audit(row.org_id, "invoice.processor_event", "invoice", row.id,
                    {"eventId": event_id, "type": type_, "status": status})
        return True

    # --- helpers ------------------------------------------------------------------------

    def _invoice(self, sub: SubscriptionRecord, kind: str, start: datetime, end: datetime,
                 lines: builtins.list[LineItem]) -> InvoiceRecord:
        """Finalize an invoice, charge it, and render its PDF (once per version)."""
        now = self.clock()
        seq = sub.invoice_seq + 1
        self._repo.update_subscription(sub.org_id, SubscriptionChanges(invoice_seq=seq))
        org = self.orgs.get(sub.org_id)
        prefix = (org.slug if org is not None else sub.org_id).split("-")[0][:8].upper()
        invoice_id = new_id("invoice")
        amount = sum(line.amount_minor for line in lines)
        customer = sub.processor_customer_id
        if not customer:
            customer = self.processor.customer(sub.org_id, org.name if org is not None else sub.org_id)
            self._repo.update_subscription(sub.org_id, SubscriptionChanges(processor_customer_id=customer))
        processor_id = self.processor.open_invoice(customer, invoice_id, lines, CURRENCY)
        row = self._repo.add_invoice(NewInvoice(
            id=invoice_id, org_id=sub.org_id, processor_invoice_id=processor_id, number=f"{prefix}-{seq:04d}",
            kind=kind, currency=CURRENCY, amount_due_minor=amount, period_start=start, period_end=end,
            due_date=now + PAYMENT_TERMS, line_items=tuple(lines),
        ))
        row = self._collect(row, sub.org_id, now)
        return self._render(row)

    def _collect(self, row: InvoiceRecord, org_id: str, now: datetime) -> InvoiceRecord:
        """Charge an open invoice. A declined payment leaves it `open` and the
        subscription `past_due` (the invoice goes `uncollectible` once it is
        overdue, see collect_overdue); a paid one settles both."""
        payment = self.processor.pay(org_id, row.processor_invoice_id, row.amount_due_minor, row.currency)
        if payment.paid:
            self._repo.update_subscription(org_id, SubscriptionChanges(status="active"))
            return self._repo.update_invoice(row.id, InvoiceChanges(
                status="paid", amount_paid_minor=row.amount_due_minor, paid_at=now, version=row.version + 1))
        self._repo.update_subscription(org_id, SubscriptionChanges(status="past_due"))
        return row

    def collect_overdue(self) -> builtins.list[InvoiceRecord]:
        """Open invoices past their due date: one more charge, else `uncollectible`."""
        now = self.clock()
        settled = []
        rows = [row for sub in self._repo.with_overdue(now) for row in self._repo.overdue(sub.org_id, now)]
        for row in rows:
            collected = self._collect(row, row.org_id, now)
            if collected.status == "open":
                collected = self._repo.update_invoice(
                    row.id, InvoiceChanges(status="uncollectible", version=row.version + 1))
            settled.append(self._render(collected))
            self._audit(row.org_id, "invoice.collect", "invoice", row.id, {"status": collected.status})
        return settled

    def _render(self, row: InvoiceRecord) -> InvoiceRecord:
        """Render and store the PDF of this invoice version (once per version)."""
        org = self.orgs.get(row.org_id)
        key = object_key(row.org_id, "invoices", f"{row.id}-v{row.version}.pdf")
        self.storage.put(key, render_invoice(row, org.name if org is not None else row.org_id), "application/pdf")
        return self._repo.update_invoice(row.id, InvoiceChanges(pdf_key=key))

    def _audit(self, org_id: str, action: str, resource_type: str, resource_id: str, details: dict[str, object]) -> None:
        """What billing does on its own (renewals, collections, processor events) is audited too."""
        AuditLog(self.work).record(AuditEntry(
            action=action, outcome="success", status=200, request_id="", client_ip=None, org_id=org_id,
            resource_type=resource_type, resource_id=resource_id, details=details))

    def _emit(self, sub: SubscriptionRecord, type_: str, data: dict[str, object]) -> None:
        self.outbox.emit(type_, sub.org_id, self.orgs.primary_workspace(sub.org_id), {"orgId": sub.org_id, **data})
