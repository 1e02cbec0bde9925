"""Every pair of a webhook endpoint's writes at once answers as one serial order would (tests/oracle.py),
through Envoy: a delivery's replay, the endpoint's PATCH, a ping and its DELETE. A replay racing the DELETE is
answered 404 (the delete came first) or 200 with the endpoint then gone, never a foreign-key 500. The end state
counts the endpoint's pings (`webhook.endpoint.test_ping` events naming it): a ping recorded twice, or recorded
after the DELETE, reads differently."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime

import pytest
from oracle import Op, Table, body, check_named, events, fixture_body, params, since, uncovered


@dataclass(frozen=True)
class Fixture:
    endpoint: str
    delivery: str
    made: datetime  # (the events of the endpoint occurred after)


def _fixture(http, tenant, receiver) -> Fixture:
    made = since()
    # State: a receiver's URL (a delivery is made and replayed; the generator's discards) and one event type (the
    # generator's `*` would fan the tenant's other events out to it: deliveries the state does not expect).
    r = http.post("/v1/webhooks", headers=tenant.auth, json=fixture_body("CreateWebhookEndpoint", state={
        "url": receiver.url(f"/oracle/{uuid.uuid4().hex}"), "events": ["persona.created"]}))
    assert r.status_code == 200, r.text
    endpoint = r.json()["endpoint"]["id"]
    assert http.post(f"/v1/webhooks/{endpoint}/ping", headers=tenant.auth,
                     json=fixture_body("PingWebhookEndpoint")).status_code == 200
    deadline = time.monotonic() + 30
    while True:  # the worker's fan-out makes the ping's delivery
        items = http.get(f"/v1/webhooks/{endpoint}/deliveries", headers=tenant.auth).json()["items"]
        if items:
            return Fixture(endpoint, items[0]["id"], made)
        assert time.monotonic() < deadline, "the ping was never fanned out to a delivery"
        time.sleep(0.05)


def _state(http, tenant, fixture: Fixture):
    """The endpoint's fields and its replays (the ping's delivery is made by the worker in its own time), and the
    events its writes recorded (the fixture's ping and each ping since)."""
    recorded = events(http, tenant.auth, fixture.made, lambda data: data.get("endpointId") == fixture.endpoint)
    got = http.get(f"/v1/webhooks/{fixture.endpoint}", headers=tenant.auth)
    if got.status_code == 404:
        return "gone", recorded
    listed = http.get(f"/v1/webhooks/{fixture.endpoint}/deliveries", headers=tenant.auth).json()["items"]
    body = got.json()
    return body["description"], body["enabled"], sum(1 for d in listed if d.get("replayOf")), recorded


def _ops(http, tenant) -> list[Op]:
    auth = tenant.auth if tenant is not None else {}  # (None: only the names, for the parameters)
    return [
        Op("replay", lambda f: http.post(f"/v1/webhooks/{f.endpoint}/deliveries/{f.delivery}/replay", headers=auth,
                                         json=body("ReplayWebhookDelivery")), "ReplayWebhookDelivery"),
        # Distinguishing: the state reads the description and `enabled`, which the generated PATCH (its URL) leaves.
        Op("patch", lambda f: http.patch(f"/v1/webhooks/{f.endpoint}", headers=auth, json=body(
            "UpdateWebhookEndpoint", distinguishing={"description": "renamed", "enabled": False})),
           "UpdateWebhookEndpoint"),
        Op("ping", lambda f: http.post(f"/v1/webhooks/{f.endpoint}/ping", headers=auth,
                                       json=body("PingWebhookEndpoint")), "PingWebhookEndpoint"),
        Op("delete", lambda f: http.delete(f"/v1/webhooks/{f.endpoint}", headers=auth), "DeleteWebhookEndpoint"),
    ]


def _table(http, tenant, receiver) -> Table:
    return Table("webhook endpoint with a delivery", make=lambda: _fixture(http, tenant, receiver),
                 read=lambda f: _state(http, tenant, f), ops=_ops(http, tenant))


@pytest.mark.parametrize(("a", "b"), params(_table(None, None, None)))
def test_two_writes_at_once_answer_as_one_serial_order(http, tenants, receiver, a, b):
    assert check_named(_table(http, tenants(), receiver), a, b) == []


def test_the_oracle_tries_every_write_of_an_endpoint():
    assert uncovered("WebhookService", [_table(None, None, None)], {"CreateWebhookEndpoint"}) == set()
