"""Every list answers one way (docs/contract-decisions.md: one list style):
`cursor` and `limit` (1 to 100, default 20) in, `items` and `nextCursor` out,
422 `validation_failed` for a `limit` out of bounds, 400 `bad_request` naming
`cursor` for a cursor the list did not issue. Checked through the edge on
every list of the OpenAPI document, so a new list cannot answer another way."""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from support import assert_envelope

DOCUMENT = json.loads((pathlib.Path(__file__).resolve().parents[2] / "gen" / "openapi.json").read_text())
LISTS = sorted(
    path for path, item in DOCUMENT["paths"].items()
    if any(p["name"] == "cursor" for p in item.get("get", {}).get("parameters", []))
)


def test_the_document_has_the_lists():
    assert {"/v1/personas", "/v1/events", "/v1/audit/events", "/v1/keys", "/v1/chat/sessions", "/v1/webhooks",
            "/v1/config", "/v1/billing/invoices", "/v1/privacy/exports"} <= set(LISTS)


@pytest.fixture(scope="module")
def admin(tenants):
    return tenants(plan="pro", platform_admin=True)


@pytest.fixture(scope="module")
def parents(http, admin) -> dict[str, str]:
    """An id for each parent collection a list sits under (the segment before a path variable)."""
    persona = http.post("/v1/personas", json={"intent": "A patient cartographer of tide pools"}, headers=admin.auth)
    assert persona.status_code == 200, persona.text
    session = http.post("/v1/chat/sessions", json={"personaId": persona.json()["id"]}, headers=admin.auth)
    assert session.status_code == 200, session.text
    webhook = http.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["persona.created"]},
                        headers=admin.auth)
    assert webhook.status_code == 200, webhook.text
    return {"personas": persona.json()["id"], "sessions": session.json()["sessionId"],
            "webhooks": webhook.json()["endpoint"]["id"]}


def _url(template: str, parents: dict[str, str]) -> str:
    return re.sub(r"([^/]+)/\{[^}]+\}", lambda m: f"{m.group(1)}/{parents[m.group(1)]}", template)


@pytest.mark.parametrize("template", LISTS)
def test_every_list_pages_one_way(http, admin, parents, template):
    url = _url(template, parents)
    page = http.get(url, params={"limit": 1}, headers=admin.auth)
    assert page.status_code == 200, page.text
    assert set(page.json()) == {"items", "nextCursor"}
    assert len(page.json()["items"]) <= 1
    for limit, code, expected in ((0, "minimum", {"minimum": 1}), (101, "maximum", {"maximum": 100})):
        error = assert_envelope(http.get(url, params={"limit": limit}, headers=admin.auth), 422, "validation_failed")
        assert error["details"] == {"validationErrors": [{"path": "limit", "code": code, "value": limit,
                                                           "expected": expected}]}
    error = assert_envelope(http.get(url, params={"cursor": "not-a-cursor"}, headers=admin.auth), 400, "bad_request")
    assert error["details"] == {"parameter": "cursor"}
    assert_envelope(http.get(url, params={"pageSize": 1}, headers=admin.auth), 400, "bad_request")
