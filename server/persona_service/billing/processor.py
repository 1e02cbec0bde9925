"""The payment-processor port and its local implementation.

`LocalProcessor` (the default) is a real processor for a self-hosted
service that bills outside any card network: it assigns deterministic ids
(`in_` + 24 hex of sha256 of the invoice id), finalizes and pays invoices
itself, and keeps their PDFs for seven years after the period ends. For
tests and demos it declines the payments of an organization whose config
item `billing.local_processor.decline_payments` is true (`decline`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

DECLINE_KEY = "billing.local_processor.decline_payments"

PDF_RETENTION = timedelta(days=7 * 365)


@dataclass(frozen=True)
class Payment:
    paid: bool
    reason: str = ""


class PaymentProcessor(Protocol):
    name: str

    def invoice_id(self, invoice_id: str) -> str:
        """The processor's id for an invoice it finalized."""
        ...

    def pay(self, org_id: str, processor_invoice_id: str, amount_minor: int, currency: str) -> Payment: ...

    def keeps_pdf(self, period_end: datetime, now: datetime) -> bool:
        """Whether the processor still holds the invoice's document."""
        ...


class LocalProcessor:
    name = "local"

    def __init__(self, decline: Callable[[str], bool] = lambda org_id: False):
        self.decline = decline

    def invoice_id(self, invoice_id: str) -> str:
        return "in_" + hashlib.sha256(invoice_id.encode()).hexdigest()[:24]

    def pay(self, org_id: str, processor_invoice_id: str, amount_minor: int, currency: str) -> Payment:
        if amount_minor > 0 and self.decline(org_id):
            return Payment(paid=False, reason="card_declined")
        return Payment(paid=True)

    def keeps_pdf(self, period_end: datetime, now: datetime) -> bool:
        return now - period_end < PDF_RETENTION


def processor_for(conn) -> PaymentProcessor:
    """The configured processor, reading what it needs on this connection."""
    from persona_service.config.service import ConfigService

    return LocalProcessor(decline=lambda org_id: bool(ConfigService(conn).org_value(org_id, DECLINE_KEY)))
