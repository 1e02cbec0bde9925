"""One rule for timestamps that have not happened yet, through Envoy
(docs/contract-decisions.md): the key is always present and its value is JSON
`null` (never omitted, never `""`), over every such field of the API."""

from __future__ import annotations

import pytest

NOT_YET = None


def _ok(response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def _not_yet(resource: dict, *fields: str) -> None:
    for field in fields:
        assert field in resource and resource[field] is NOT_YET, (field, resource)


@pytest.fixture(scope="module")
def org(tenants):
    return tenants(plan="enterprise")


@pytest.fixture(scope="module")
def persona(http, org) -> dict:
    return _ok(http.post("/v1/personas", json={"intent": "A patient beekeeper who teaches children"}, headers=org.auth))


def test_personas_listings_and_chat_sessions(http, org, persona):
    _not_yet(persona, "deletedAt", "purgeAt", "archivedAt")
    _not_yet(_ok(http.get(f"/v1/personas/{persona['id']}", headers=org.auth)), "deletedAt", "purgeAt", "archivedAt")
    session = _ok(http.post("/v1/chat/sessions", json={"personaId": persona["id"]}, headers=org.auth))
    _not_yet(session, "endedAt")
    listing = _ok(http.post("/v1/marketplace/listings", headers=org.auth, json={
        "personaId": persona["id"], "title": "Bees for beginners", "audienceTags": ["nature"], "priceMinor": 0}))
    assert listing["status"] == "pending_review"
    _not_yet(listing, "publishedAt")


def test_keys_scim_tokens_and_config(http, org):
    key = _ok(http.post("/v1/keys", json={"name": "ci", "scopes": ["chat:read"]}, headers=org.auth))["key"]
    _not_yet(key, "expiresAt", "revokedAt")
    token = _ok(http.post("/v1/auth/scim/tokens", json={"name": "Okta"}, headers=org.auth))["token"]
    _not_yet(token, "revokedAt")
    for item in _ok(http.get("/v1/config", headers=org.auth))["items"]:
        if item["source"] == "default":
            _not_yet(item, "updatedAt")


def test_webhooks_and_privacy_exports(http, org):
    made = _ok(http.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["*"]}, headers=org.auth))
    _not_yet(made["endpoint"], "previousSecretExpiresAt")
    _not_yet(_ok(http.get(f"/v1/webhooks/{made['endpoint']['id']}/secret", headers=org.auth)), "previousSecretExpiresAt")
    export = _ok(http.post("/v1/privacy/exports", json={}, headers=org.auth))
    assert export["status"] == "pending"
    _not_yet(export, "expiresAt", "completedAt")


def test_an_unpaid_invoice(http, tenants):
    org = tenants(plan="free")
    _ok(http.put("/v1/config/billing.local_processor.decline_payments", json={"value": True, "level": "org"},
                 headers=org.auth))
    _ok(http.post("/v1/billing/subscription/change", json={"plan": "pro"}, headers=org.auth))
    (invoice,) = _ok(http.get("/v1/billing/invoices", headers=org.auth))["items"]
    assert invoice["status"] == "open"
    _not_yet(invoice, "paidAt")
    _not_yet(_ok(http.get(f"/v1/billing/invoices/{invoice['invoiceId']}", headers=org.auth)), "paidAt")
