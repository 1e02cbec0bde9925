"""A JSON body must be sent as JSON: where the transcoder reads the body as
JSON, the edge requires `application/json` (parameters allowed, a charset of
UTF-8 only) and answers anything else 415 `unsupported_media_type` in the
envelope, before anything is created. Bodiless requests need no content type;
raw bodies (google.api.HttpBody: SCIM, the payment processor's webhook) are
their RPC's to check; native gRPC is untouched."""

from __future__ import annotations

import json

import pytest
from support import assert_envelope

PERSONA = json.dumps({"intent": "A grumpy lighthouse keeper who loves jazz"}).encode()


def _count(http, tenant) -> int:
    r = http.get("/v1/personas", params={"limit": 100}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return len(r.json()["items"])


@pytest.mark.parametrize(("content_type", "body"), [
    ("text/plain", PERSONA),
    ("application/xml", b"<persona><intent>A grumpy lighthouse keeper</intent></persona>"),
    ("application/x-www-form-urlencoded", b"intent=A+grumpy+lighthouse+keeper"),
    (None, PERSONA),
    ("application/json; charset=latin-1", PERSONA),
    ("application/jsonx", PERSONA),
])
def test_a_json_body_sent_as_something_else_is_415_and_creates_nothing(http, tenants, content_type, body):
    tenant = tenants()
    headers = {**tenant.auth, **({"content-type": content_type} if content_type else {})}
    r = http.post("/v1/personas", headers=headers, content=body)
    if content_type is None:  # httpx sends none; the request still has a body
        assert "content-type" not in r.request.headers
    error = assert_envelope(r, 415, "unsupported_media_type")
    assert "application/json" in error["message"]
    assert _count(http, tenant) == 0


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "Application/JSON;charset=\"UTF-8\""])
def test_json_with_or_without_a_utf8_charset_is_read(http, tenant, content_type):
    body = json.dumps({"name": "media", "scopes": ["chat:read"]}).encode()
    r = http.post("/v1/keys", headers={**tenant.auth, "content-type": content_type}, content=body)
    assert r.status_code == 200, r.text


def test_a_bodiless_write_needs_no_content_type(http, tenant):
    made = http.post("/v1/keys", headers=tenant.auth, json={"name": "revoke me", "scopes": ["chat:read"]})
    key_id = made.json()["key"]["id"]
    r = http.post(f"/v1/keys/{key_id}/revoke", headers=tenant.auth)
    assert "content-type" not in r.request.headers
    assert r.status_code == 200, r.text


def test_a_scim_body_keeps_its_own_media_types(http, tenants):
    made = http.post("/v1/auth/scim/tokens", headers=tenants(plan="enterprise").auth, json={"name": "media types"})
    assert made.status_code == 200, made.text
    scim = {"Authorization": f"Bearer {made.json()['secret']}"}
    user = {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "media@example.com"}
    created = http.post("/v1/auth/scim/v2/Users", headers={**scim, "content-type": "application/scim+json"},
                        content=json.dumps(user).encode())
    assert created.status_code == 201, created.text
    # Anything else is SCIM's own refusal, in SCIM's error schema.
    r = http.post("/v1/auth/scim/v2/Users", headers={**scim, "content-type": "text/plain"},
                  content=json.dumps(user).encode())
    assert r.status_code == 415 and r.headers["content-type"] == "application/scim+json"


def test_the_payment_webhook_reads_its_raw_body_whatever_its_type(http):
    r = http.post("/v1/billing/stripe/webhook", headers={"content-type": "text/plain"}, content=b"{}")
    assert r.status_code != 415, r.text
