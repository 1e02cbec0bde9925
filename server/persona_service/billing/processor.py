"""The payment-processor port and its local implementation.

`LocalProcessor` (the default) is a real processor for a self-hosted
service that bills outside any card network: deterministic ids (`cus_` /
`in_` + 24 hex of sha256 of the organization / invoice id), it finalizes
and pays invoices itself, and the service renders and keeps their PDFs
(seven years after the period ends). For tests and demos it declines the
payments of an organization whose config item
`billing.local_processor.decline_payments` is true. `StripeProcessor`
(stripe_processor.py) is the other implementation.

The configured processor is an App resource (`PROCESSOR`): opened once per
process, closed with it (Stripe's client holds a connection pool).
`processor_for(owner, work)` binds it to one unit of work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from persona_service.billing.records import LineItem, Payment
from persona_service.billing.settings import BillingSettings
from persona_service.kernel.api import HasResources, Resource, Settings, Work, load

DECLINE_KEY = "billing.local_processor.decline_payments"
PDF_RETENTION = timedelta(days=7 * 365)


class PaymentProcessor(Protocol):
    name: str
    # The processor hosts invoice PDFs itself (pdf_url); else the service renders and stores them.
    hosts_pdfs: bool

    def customer(self, org_id: str, org_name: str) -> str:
        """A new customer for the organization; its id."""
        ...

    def open_invoice(self, customer_id: str, invoice_id: str, lines: Sequence[LineItem], currency: str) -> str:
        """Create and finalize the invoice at the processor; its id there."""
        ...

    def pay(self, org_id: str, processor_invoice_id: str, amount_minor: int, currency: str) -> Payment: ...

    def keeps_pdf(self, period_end: datetime, now: datetime) -> bool:
        """Whether the processor still keeps the invoice's document (else 410)."""
        ...

    def pdf_url(self, processor_invoice_id: str) -> str | None:
        """The processor's own PDF URL, fetched fresh (hosts_pdfs); None: gone."""
        ...

    def bind(self, work: Work) -> PaymentProcessor:
        """This processor for one unit of work: what it reads of the service's own state, it reads in `work`."""
        ...

    def close(self) -> None:
        """Release what it holds (its HTTP client's connections)."""
        ...


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:24]


class LocalProcessor:
    name = "local"
    hosts_pdfs = False

    def __init__(self, decline: Callable[[str], bool] = lambda org_id: False):
        self.decline = decline

    def customer(self, org_id: str, org_name: str) -> str:
        return "cus_" + _digest(org_id)

    def open_invoice(self, customer_id: str, invoice_id: str, lines: Sequence[LineItem], currency: str) -> str:
        return "in_" + _digest(invoice_id)

    def pay(self, org_id: str, processor_invoice_id: str, amount_minor: int, currency: str) -> Payment:
        if amount_minor > 0 and self.decline(org_id):
            return Payment(paid=False, reason="card_declined")
        return Payment(paid=True)

    def keeps_pdf(self, period_end: datetime, now: datetime) -> bool:
        return now - period_end < PDF_RETENTION

    def pdf_url(self, processor_invoice_id: str) -> str | None:
        return None

    def bind(self, work: Work) -> LocalProcessor:
        from persona_service.config.api import ConfigService

        return LocalProcessor(decline=lambda org_id: ConfigService(work).org_flag(org_id, DECLINE_KEY))

    def close(self) -> None:
        pass


def open_processor(settings: BillingSettings) -> PaymentProcessor:
    """The configured processor (PERSONA_BILLING_PROCESSOR)."""
    if settings.billing_processor == "stripe":
        from persona_service.billing.stripe_processor import StripeProcessor

        return StripeProcessor(settings.stripe_secret_key, settings.stripe_api_base)
    return LocalProcessor()


def _open(settings: Settings) -> PaymentProcessor:
    return open_processor(load(BillingSettings))


def _close(processor: PaymentProcessor) -> None:
    processor.close()


# The process's payment processor, owned by its App.
PROCESSOR: Resource[PaymentProcessor] = Resource("billing.processor", _open, _close)


def processor_for(owner: HasResources, work: Work) -> PaymentProcessor:
    """The processor of an App (or of a servicer's deps, or a job's runtime), for the unit of work `work`."""
    return owner.resources.get(PROCESSOR).bind(work)
