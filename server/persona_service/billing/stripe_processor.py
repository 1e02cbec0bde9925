"""Stripe, through the official `stripe` package: a customer per
organization, invoice items and an invoice per service invoice, finalized
and paid at once (`charge_automatically`); the PDF is Stripe's own
`invoice_pdf`, fetched fresh right before each redirect.

Card errors are declines (the invoice stays open); other Stripe errors are
502 `provider_error` (their envelope goes to the audit log, never to
callers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TypeVar

import requests
import stripe

from persona_service.billing.records import LineItem, Payment
from persona_service.kernel.api import ProviderError, Work

T = TypeVar("T")


class StripeProcessor:
    name = "stripe"
    hosts_pdfs = True

    def __init__(self, api_key: str, api_base: str = "") -> None:
        # One session for every thread (the default is one per thread), so `close` releases all its connections.
        self.session = requests.Session()
        # (base_addresses None: Stripe's own, as when it is not passed)
        self.client = stripe.StripeClient(api_key, max_network_retries=2,
                                          http_client=stripe.RequestsClient(session=self.session),
                                          base_addresses={"api": api_base} if api_base else None)

    def customer(self, org_id: str, org_name: str) -> str:
        return self._call(lambda: self.client.v1.customers.create(
            params={"name": org_name, "metadata": {"org_id": org_id}})).id

    def open_invoice(self, customer_id: str, invoice_id: str, lines: Sequence[LineItem], currency: str) -> str:
        for line in lines:
            self._call(partial(self.client.v1.invoice_items.create, params={
                "customer": customer_id, "amount": line.amount_minor, "currency": currency,
                "description": line.description}))
        invoice = self._call(lambda: self.client.v1.invoices.create(params={
            "customer": customer_id, "collection_method": "charge_automatically", "auto_advance": False,
            "pending_invoice_items_behavior": "include", "metadata": {"invoice_id": invoice_id}}))
        self._call(lambda: self.client.v1.invoices.finalize_invoice(invoice.id))
        return invoice.id

    def pay(self, org_id: str, processor_invoice_id: str, amount_minor: int, currency: str) -> Payment:
        if amount_minor <= 0:
            return Payment(paid=True)
        try:
            self.client.v1.invoices.pay(processor_invoice_id)
        except stripe.CardError as err:
            return Payment(paid=False, reason=str(err.code or "card_declined"))
        except stripe.StripeError as err:
            raise _provider_error(err) from None
        return Payment(paid=True)

    def keeps_pdf(self, period_end: datetime, now: datetime) -> bool:
        return True  # Stripe says, through pdf_url

    def pdf_url(self, processor_invoice_id: str) -> str | None:
        invoice = self._call(lambda: self.client.v1.invoices.retrieve(processor_invoice_id))
        return invoice.invoice_pdf or None

    def bind(self, work: Work) -> StripeProcessor:
        return self  # Stripe keeps all it needs

    def close(self) -> None:
        self.session.close()

    @staticmethod
    def _call(request: Callable[[], T]) -> T:
        try:
            return request()
        except stripe.StripeError as err:
            raise _provider_error(err) from None


def _provider_error(err: stripe.StripeError) -> ProviderError:
    body = err.json_body if isinstance(err.json_body, dict) else {"message": str(err)}
    return ProviderError("stripe", f"stripe: {type(err).__name__}", body, err.http_status)
