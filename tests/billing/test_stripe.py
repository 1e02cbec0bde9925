"""The Stripe processor against a real local HTTP server speaking the parts
of Stripe's API it uses, directly and through Envoy: invoices finalized and
paid at Stripe, declines, upstream errors, the PDF redirect to Stripe's
fresh `invoice_pdf` (410 once gone), and Stripe's webhooks verified with
the signing secret and applied once, in order. The processor is the App's:
one client (one connection pool) for every call, closed with the App."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime

import pytest
from persona_service.billing.processor import PROCESSOR, processor_for
from persona_service.billing.records import LineItem
from persona_service.billing.stripe_processor import StripeProcessor
from persona_service.kernel.data.work import Work
from persona_service.kernel.models import ProviderError
from persona_service.kernel.resources import Resources
from persona_service.kernel.settings import Settings, forget
from stripe_stub import StripeStub
from support import TenantFactory, client_for, engine_for, make_stack, running

WEBHOOK_SECRET = "whsec_test_secret"


@pytest.fixture(scope="module")
def stub():
    with StripeStub() as server:
        yield server


def stripe_env(stub) -> dict[str, str]:
    return {"PERSONA_BILLING_PROCESSOR": "stripe", "PERSONA_STRIPE_SECRET_KEY": "sk_test_stub",
            "PERSONA_STRIPE_API_BASE": stub.url, "PERSONA_STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET}


@pytest.fixture(scope="module")
def stripe_stack(stub, tmp_path_factory):
    # No webhook worker: nothing here is delivered (Stripe's webhooks come in through the servers).
    with running(make_stack(tmp_path_factory.mktemp("billing-stripe"), workers=0, **stripe_env(stub))) as stack, \
            engine_for(stack) as engine, client_for(stack) as http:
        yield http, TenantFactory(engine)


def _line(amount: int) -> LineItem:
    now = datetime.now(UTC)
    return LineItem("Pro plan", 1, amount, now, now)


def test_the_adapter_finalizes_and_pays(stub):
    stripe = StripeProcessor("sk_test_stub", stub.url)
    customer = stripe.customer("org_1", "Acme")
    invoice_id = stripe.open_invoice(customer, "inv_1", [_line(4900)], "usd")
    assert stub.invoices[invoice_id]["status"] == "open" and stub.invoices[invoice_id]["amount_due"] == 4900
    assert stripe.pay("org_1", invoice_id, 4900, "usd").paid
    assert stub.invoices[invoice_id]["status"] == "paid"
    assert stripe.pdf_url(invoice_id).endswith(f"/pdf/{invoice_id}.pdf")
    assert ("POST", "/v1/customers", {"name": "Acme", "metadata[org_id]": "org_1"}) in stub.requests


def test_a_card_error_is_a_decline_and_other_errors_are_provider_errors(stub):
    stripe = StripeProcessor("sk_test_stub", stub.url)
    invoice_id = stripe.open_invoice(stripe.customer("org_2", "Beta"), "inv_2", [_line(100)], "usd")
    stub.decline = True
    try:
        payment = stripe.pay("org_2", invoice_id, 100, "usd")
    finally:
        stub.decline = False
    assert not payment.paid and payment.reason == "card_declined"
    with pytest.raises(ProviderError) as raised:
        stripe.pdf_url("in_missing")
    assert raised.value.upstream_status == 404 and raised.value.provider == "stripe"


class Owner:
    """What processor_for needs of an App: its resources."""

    def __init__(self, data_dir):
        self.resources = Resources(Settings(data_dir=data_dir, jwt_secret="test-secret"), [PROCESSOR])


def test_an_app_opens_one_processor_and_closes_its_client_with_it(stub, stripe_stack, monkeypatch, tmp_path):
    _, tenants = stripe_stack
    with monkeypatch.context() as env:
        for name, value in stripe_env(stub).items():
            env.setenv(name, value)
        forget()  # this process's settings, read again from the environment above
        try:
            app, other = Owner(tmp_path / "app"), Owner(tmp_path / "other")
            with tenants.engine.connect() as first, tenants.engine.connect() as second:
                processor = processor_for(app, Work.on(first))
                assert processor_for(app, Work.on(second)) is processor and processor_for(other, Work.on(first)) is not processor
            assert isinstance(processor, StripeProcessor)
            assert processor.customer("org_3", "Gamma").startswith("cus_")
            pools = processor.session.get_adapter(stub.url).poolmanager.pools
            assert len(pools) == 1  # the connection pool every call shares
            app.resources.close()
            assert len(pools) == 0
            other.resources.close()
        finally:
            forget()


def _signed(payload: str, secret: str = WEBHOOK_SECRET, at: int | None = None) -> dict[str, str]:
    at = at or int(time.time())
    signature = hmac.new(secret.encode(), f"{at}.{payload}".encode(), hashlib.sha256).hexdigest()
    return {"Stripe-Signature": f"t={at},v1={signature}", "Content-Type": "application/json"}


def _event(event_id: str, type_: str, invoice_id: str, created: int, amount_paid: int = 0) -> str:
    return json.dumps({"id": event_id, "object": "event", "type": type_, "created": created, "api_version": "2024-06-20",
                       "data": {"object": {"id": invoice_id, "object": "invoice", "amount_paid": amount_paid}}})


def test_through_envoy_invoices_pdfs_and_webhooks(stripe_stack, stub):
    http, tenants = stripe_stack
    org = tenants(plan="free")
    r = http.post("/v1/billing/subscription/change", json={"plan": "pro"}, headers=org.auth)
    assert r.status_code == 200, r.text
    invoice = http.get("/v1/billing/invoices", headers=org.auth).json()["items"][0]
    processor_id = invoice["stripeInvoiceId"]
    assert processor_id in stub.invoices and invoice["status"] == "paid"

    r = http.get(f"/v1/billing/invoices/{invoice['invoiceId']}/pdf", headers=org.auth, follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == f"{stub.url}/pdf/{processor_id}.pdf"
    stub.pdf_gone.add(processor_id)
    r = http.get(f"/v1/billing/invoices/{invoice['invoiceId']}/pdf", headers=org.auth, follow_redirects=False)
    assert r.status_code == 410 and r.json()["error"]["code"] == "asset_expired"

    hook = "/v1/billing/stripe/webhook"
    created = int(time.time()) + 10
    body = _event("evt_stub_1", "invoice.marked_uncollectible", processor_id, created)
    r = http.post(hook, content=body, headers=_signed(body))
    assert r.status_code == 200, r.text
    assert r.json() == {"eventId": "evt_stub_1", "applied": True}
    get = f"/v1/billing/invoices/{invoice['invoiceId']}"
    assert http.get(get, headers=org.auth).json()["status"] == "uncollectible"
    # A redelivery changes nothing; an older event is ignored; a newer one applies.
    assert http.post(hook, content=body, headers=_signed(body)).json()["applied"] is False
    older = _event("evt_stub_0", "invoice.paid", processor_id, created - 5, 4900)
    assert http.post(hook, content=older, headers=_signed(older)).json()["applied"] is False
    assert http.get(get, headers=org.auth).json()["status"] == "uncollectible"
    newer = _event("evt_stub_2", "invoice.voided", processor_id, created + 5)
    assert http.post(hook, content=newer, headers=_signed(newer)).json()["applied"] is True
    assert http.get(get, headers=org.auth).json()["status"] == "void"

    for headers in (_signed(body, secret="whsec_other"), _signed(body, at=int(time.time()) - 3600), {}):
        r = http.post(hook, content=body, headers={"Content-Type": "application/json", **headers})
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", r.text


def test_a_decline_at_stripe_leaves_the_invoice_open(stripe_stack, stub):
    http, tenants = stripe_stack
    org = tenants(plan="free")
    stub.decline = True
    try:
        assert http.post("/v1/billing/subscription/change", json={"plan": "team"}, headers=org.auth).status_code == 200
    finally:
        stub.decline = False
    invoice = http.get("/v1/billing/invoices", headers=org.auth).json()["items"][0]
    assert invoice["status"] == "open" and invoice["paidAt"] is None
    assert http.get("/v1/billing/subscription", headers=org.auth).json()["status"] == "past_due"
