"""Typed records of the billing module."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from persona_service.kernel.api import iso

PLAN_ORDER = ("free", "pro", "team", "enterprise")
# Price per monthly period, minor units of CURRENCY.
PRICES_MINOR = {"free": 0, "pro": 4_900, "team": 19_900, "enterprise": 99_900}
CURRENCY = "usd"


@dataclass(frozen=True, slots=True)
class SubscriptionRecord:
    org_id: str
    plan: str
    status: str
    current_period_start: datetime
    current_period_end: datetime
    cancel_at_period_end: bool
    credit_minor: int
    invoice_seq: int
    pending_lines: tuple[PendingLine, ...]
    processor_customer_id: str


@dataclass(frozen=True, slots=True)
class InvoiceRecord:
    id: str
    org_id: str
    processor_invoice_id: str
    number: str
    kind: str
    status: str
    currency: str
    amount_due_minor: int
    amount_paid_minor: int
    period_start: datetime
    period_end: datetime
    due_date: datetime
    paid_at: datetime | None
    line_items: tuple[LineItem, ...]
    version: int
    pdf_key: str
    processor_event_at: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SubscriptionChanges:
    """What an update of a subscription sets (None: left as it is)."""

    plan: str | None = None
    status: str | None = None
    current_period_start: datetime | None = None
    current_period_end: datetime | None = None
    cancel_at_period_end: bool | None = None
    credit_minor: int | None = None
    invoice_seq: int | None = None
    pending_lines: tuple[PendingLine, ...] | None = None
    processor_customer_id: str | None = None


@dataclass(frozen=True, slots=True)
class NewInvoice:
    id: str
    org_id: str
    processor_invoice_id: str
    number: str
    kind: str
    currency: str
    amount_due_minor: int
    period_start: datetime
    period_end: datetime
    due_date: datetime
    line_items: tuple[LineItem, ...]
    status: str = "open"
    amount_paid_minor: int = 0
    version: int = 1


@dataclass(frozen=True, slots=True)
class InvoiceChanges:
    """What an update of an invoice sets (None: left as it is)."""

    status: str | None = None
    amount_paid_minor: int | None = None
    paid_at: datetime | None = None
    version: int | None = None
    pdf_key: str | None = None
    processor_event_at: int | None = None


@dataclass(frozen=True)
class LineItem:
    description: str
    quantity: int
    unit_amount_minor: int
    period_start: datetime
    period_end: datetime
    proration: bool = False

    @property
    def amount_minor(self) -> int:
        return self.quantity * self.unit_amount_minor

    def as_json(self) -> dict[str, object]:
        """As an invoice's `line_items` column holds it (JSONB)."""
        return {"description": self.description, "quantity": self.quantity,
                "unitAmountMinor": self.unit_amount_minor, "amountMinor": self.amount_minor,
                "periodStart": iso(self.period_start), "periodEnd": iso(self.period_end),
                "proration": self.proration}

    @classmethod
    def of_json(cls, element: object) -> LineItem:
        """One element of an invoice's `line_items` column (`amountMinor` is derived: quantity x unit)."""
        stored = _stored(element)
        return cls(str(stored["description"]), _whole(stored["quantity"]), _whole(stored["unitAmountMinor"]),
                   _time(stored["periodStart"]), _time(stored["periodEnd"]), bool(stored["proration"]))


@dataclass(frozen=True, slots=True)
class PendingLine:
    """A line for the subscription's next renewal invoice (negative: owed to the organization), e.g. a
    marketplace sale's proceeds."""

    description: str
    amount_minor: int

    def as_json(self) -> dict[str, object]:
        """As a subscription's `pending_lines` column holds it (JSONB)."""
        return {"description": self.description, "amountMinor": self.amount_minor}

    @classmethod
    def of_json(cls, element: object) -> PendingLine:
        """One element of a subscription's `pending_lines` column."""
        stored = _stored(element)
        return cls(str(stored["description"]), _whole(stored["amountMinor"]))


# Readers of the lines' stored JSON (the columns hold what as_json wrote): what it holds, else a TypeError.

def _stored(element: object) -> Mapping[str, object]:
    if not isinstance(element, dict):
        raise TypeError(f"a stored line is a JSON object, not {type(element).__name__}")
    return element


def _whole(value: object) -> int:
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"an integer was expected, not {type(value).__name__}")


def _time(value: object) -> datetime:
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    raise TypeError(f"an ISO 8601 time was expected, not {type(value).__name__}")


@dataclass(frozen=True)
class Payment:
    """A processor's answer to a charge (here, below both processors, so neither imports the other)."""

    paid: bool
    reason: str = ""
