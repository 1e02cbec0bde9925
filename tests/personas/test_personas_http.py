"""Persona answers through Envoy hold to the contract the API publishes."""

from __future__ import annotations


def test_a_drafted_soul_keeps_the_published_limits(http, tenant):
    # Found by schemathesis: a long given backstory made the drafted `fear` longer than Soul.fear's 2,000.
    r = http.post("/v1/personas", headers=tenant.auth, json={
        "intent": "000", "soul": {"desire": "0" * 20, "backstory": "0" * 7990}})
    assert r.status_code == 200, r.text
    soul = r.json()["soul"]
    assert len(soul["fear"]) <= 2000 and len(soul["desire"]) <= 2000 and len(soul["backstory"]) <= 8000
    assert len(soul["speakingStyle"]) <= 2000 and len(soul["traits"]) <= 20
