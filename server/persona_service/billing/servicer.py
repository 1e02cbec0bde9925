from __future__ import annotations

import json

from persona.v1 import billing_pb2

from persona_service.billing.processor import processor_for
from persona_service.billing.records import CURRENCY, PRICES_MINOR, InvoiceRecord, SubscriptionRecord
from persona_service.billing.service import BillingService
from persona_service.billing.settings import BillingSettings
from persona_service.files.api import storage_for
from persona_service.kernel.api import (
    BadRequest,
    NotFound,
    RequestContext,
    ServicerDeps,
    int32,
    load,
    nullable_time,
    page_limit,
    timestamp,
)

# Stripe's own default: a signature older than this is refused (replays).
WEBHOOK_TOLERANCE_SECONDS = 300


class BillingServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.settings = load(BillingSettings)

    def _service(self, ctx: RequestContext) -> BillingService:
        return BillingService(ctx.work, processor_for(self.deps, ctx.work), storage_for(self.deps),
                              cursors=self.deps.cursors)

    def _changed(self, ctx: RequestContext, before: SubscriptionRecord | None,
                 after: SubscriptionRecord) -> billing_pb2.Subscription:
        if before is None or before.plan != after.plan:
            org_id = after.org_id
            # Every process drops the organization's cached credentials and limits: the next call sees the plan.
            ctx.after_commit.append(lambda: self.deps.invalidate(f"org:{org_id}"))
        return subscription(after)

    def GetSubscription(self, request: billing_pb2.GetSubscriptionRequest,
                        ctx: RequestContext) -> billing_pb2.Subscription:
        return subscription(self._service(ctx).subscription(ctx.caller.org_id))

    def ChangeSubscription(self, request: billing_pb2.ChangeSubscriptionRequest,
                           ctx: RequestContext) -> billing_pb2.Subscription:
        service = self._service(ctx)
        before = service.subscription(ctx.caller.org_id, for_update=True)  # what the change decides on, held
        return self._changed(ctx, before, service.change(ctx.caller, request.plan))

    def CancelSubscription(self, request: billing_pb2.CancelSubscriptionRequest,
                           ctx: RequestContext) -> billing_pb2.Subscription:
        return subscription(self._service(ctx).cancel(ctx.caller))

    def ResumeSubscription(self, request: billing_pb2.ResumeSubscriptionRequest,
                           ctx: RequestContext) -> billing_pb2.Subscription:
        return subscription(self._service(ctx).resume(ctx.caller))

    def ListInvoices(self, request: billing_pb2.ListInvoicesRequest,
                     ctx: RequestContext) -> billing_pb2.ListInvoicesResponse:
        rows, token = self._service(ctx).invoices(ctx.caller, request.cursor,
                                                  page_limit(request))
        return billing_pb2.ListInvoicesResponse(items=[invoice(r) for r in rows], next_cursor=token)

    def GetInvoice(self, request: billing_pb2.GetInvoiceRequest, ctx: RequestContext) -> billing_pb2.Invoice:
        return invoice(self._service(ctx).invoice(ctx.caller, request.id))

    def ReceiveStripeEvent(self, request: billing_pb2.ReceiveStripeEventRequest,
                           ctx: RequestContext) -> billing_pb2.StripeEventReceipt:
        import stripe  # here, not at import: stripe costs every process start (docs/testing.md)

        settings = self.settings
        if settings.billing_processor != "stripe" or not settings.stripe_webhook_secret:
            raise NotFound("webhook endpoint")
        signature = ctx.metadata.get("stripe-signature", "")
        payload = request.payload.data.decode("utf-8", "replace")
        try:
            stripe.WebhookSignature.verify_header(payload, signature, settings.stripe_webhook_secret,
                                                  tolerance=WEBHOOK_TOLERANCE_SECONDS)
            event = json.loads(payload)
            event_id, type_, created = str(event["id"]), str(event["type"]), int(event["created"])
            invoice = event["data"]["object"] if type_.startswith("invoice.") else {}
            invoice_id, paid = str(invoice.get("id", "")), int(invoice.get("amount_paid") or 0)
        except stripe.SignatureVerificationError:
            raise BadRequest("The Stripe signature does not match the body (or is too old).",
                             {"header": "Stripe-Signature"}) from None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise BadRequest("The body is not a Stripe event.", {"reason": "malformed_event"}) from None
        applied = bool(invoice_id) and self._service(ctx).apply_processor_event(
            event_id, type_, created, invoice_id, paid)
        return billing_pb2.StripeEventReceipt(event_id=event_id, applied=applied)

    def GetInvoicePdf(self, request: billing_pb2.GetInvoicePdfRequest,
                      ctx: RequestContext) -> billing_pb2.InvoicePdfLink:
        link = self._service(ctx).pdf_link(ctx.caller, request.id)
        ctx.respond(cache_control="no-store")
        return billing_pb2.InvoicePdfLink(uri=link.url, expires_at=timestamp(link.expires_at))


def subscription(row: SubscriptionRecord) -> billing_pb2.Subscription:
    return billing_pb2.Subscription(
        org_id=row.org_id, plan=row.plan, status=row.status, current_period_start=timestamp(row.current_period_start),
        current_period_end=timestamp(row.current_period_end), cancel_at_period_end=row.cancel_at_period_end,
        price_minor=PRICES_MINOR[row.plan], currency=CURRENCY, credit_minor=row.credit_minor,
    )


def invoice(row: InvoiceRecord) -> billing_pb2.Invoice:
    message = billing_pb2.Invoice(
        invoice_id=row.id, stripe_invoice_id=row.processor_invoice_id, number=row.number, status=row.status,
        currency=row.currency, amount_due_minor=row.amount_due_minor, amount_paid_minor=row.amount_paid_minor,
        period_start=timestamp(row.period_start), period_end=timestamp(row.period_end),
        due_date=timestamp(row.due_date),
        paid_at=nullable_time(row.paid_at),
    )
    for line in row.line_items:
        message.line_items.add(
            description=line.description, quantity=int32(line.quantity), unit_amount_minor=line.unit_amount_minor,
            amount_minor=line.amount_minor, proration=line.proration, period_start=timestamp(line.period_start),
            period_end=timestamp(line.period_end))
    return message
