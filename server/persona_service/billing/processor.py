"""The payment-processor port and its local implementation.

`LocalProcessor` (the default) is a real processor for a self-hosted
service that bills outside any card network: it assigns deterministic ids
(`in_` + 24 hex of sha256 of the invoice id), finalizes and pays invoices
itself, and keeps their PDFs for seven years after the period ends.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

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

    def pay(self, processor_invoice_id: str, amount_minor: int, currency: str) -> Payment: ...

    def keeps_pdf(self, period_end: datetime, now: datetime) -> bool:
        """Whether the processor still holds the invoice's document."""
        ...


class LocalProcessor:
    name = "local"

    def invoice_id(self, invoice_id: str) -> str:
        return "in_" + hashlib.sha256(invoice_id.encode()).hexdigest()[:24]

    def pay(self, processor_invoice_id: str, amount_minor: int, currency: str) -> Payment:
        return Payment(paid=True)

    def keeps_pdf(self, period_end: datetime, now: datetime) -> bool:
        return now - period_end < PDF_RETENTION
