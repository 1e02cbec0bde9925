"""Usage over time (GET /v1/usage) through Envoy: UTC day buckets (empty days
included, the day boundary at midnight UTC), grouping by persona and by key,
filters, totals, what counts (regenerated and removed replies), the range's
bounds (422 naming the field) and tenant isolation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from support import assert_envelope
from test_chat_http import make_persona, make_session, send


def usage(http, tenant, **params) -> dict:
    r = http.get("/v1/usage", params=params, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def new_key(http, tenant, name: str) -> tuple[str, dict[str, str]]:
    r = http.post("/v1/keys", json={"name": name, "scopes": ["chat:read", "chat:write"]}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()["key"]["id"], {"Authorization": f"Bearer {r.json()['secret']}"}


@pytest.fixture(scope="module")
def used(http, tenants, engine):
    """A tenant with replies of two personas, by two keys, two of them moved to other UTC days."""
    tenant = tenants()
    jazz, sea = make_persona(http, tenant), make_persona(http, tenant, "A cheerful sailor who sings shanties")
    key_id, other = new_key(http, tenant, "usage-test")
    a = make_session(http, tenant, jazz)["sessionId"]
    replies = [send(http, tenant, a, f"Hello number {i}").json()["reply"] for i in range(3)]
    r = http.post(f"/v1/chat/sessions/{a}/messages/{replies[-1]['id']}/regenerate", json={}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    replies.append(r.json()["reply"])
    b = http.post("/v1/chat/sessions", json={"personaId": sea}, headers=other).json()["sessionId"]
    r = http.post(f"/v1/chat/sessions/{b}/messages", json={"content": "Sing to me."}, headers=other)
    assert r.status_code == 200, r.text
    replies.append(r.json()["reply"])
    # Move two replies of persona `jazz` to 23:59:59 UTC two days ago and 00:00:00 UTC yesterday.
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    moved = {replies[0]["id"]: today - timedelta(days=1, seconds=1), replies[1]["id"]: today - timedelta(days=1)}
    with engine.begin() as conn:
        for message_id, at in moved.items():
            conn.execute(text("UPDATE chat_messages SET created_at = :at WHERE id = :id"), {"at": at, "id": message_id})
    return tenant, {"jazz": jazz, "sea": sea, "key": key_id, "replies": replies, "today": today}


def cost(replies) -> int:
    return sum(r["usage"]["costUsdMicros"] for r in replies)


def test_days_are_utc_buckets_with_empty_days(http, used):
    tenant, seen = used
    today, replies = seen["today"], seen["replies"]
    start = (today - timedelta(days=3)).date().isoformat()
    body = usage(http, tenant, start=start, end=today.date().isoformat())
    assert body["groupBy"] == "day" and body["start"] == f"{start}T00:00:00Z"
    assert body["end"] == (today + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    days = {b["key"]: b for b in body["buckets"]}
    assert list(days) == [(today - timedelta(days=n)).date().isoformat() for n in (3, 2, 1, 0)]
    three, two, one, now = (days[(today - timedelta(days=n)).date().isoformat()] for n in (3, 2, 1, 0))
    assert three["generations"] == 0 and three["costUsdMicros"] == 0
    assert two["generations"] == 1 and two["costUsdMicros"] == replies[0]["usage"]["costUsdMicros"]
    assert one["generations"] == 1 and one["inputTokens"] == replies[1]["usage"]["inputTokens"]
    assert now["generations"] == 3 and now["costUsdMicros"] == cost(replies[2:])  # the alternative counts
    totals = body["totals"]
    assert totals["key"] == "" and totals["generations"] == 5 and totals["costUsdMicros"] == cost(replies)
    assert totals["outputTokens"] == sum(r["usage"]["outputTokens"] for r in replies)
    # A timestamp range: only yesterday's first instant onward.
    since = usage(http, tenant, start=(today - timedelta(days=1)).isoformat(), groupBy="day")
    assert since["totals"]["generations"] == 4


def test_by_persona_and_by_key_most_costly_first(http, used):
    tenant, seen = used
    by_persona = usage(http, tenant, groupBy="persona")["buckets"]
    assert {b["key"]: b["generations"] for b in by_persona} == {seen["jazz"]: 4, seen["sea"]: 1}
    assert [b["costUsdMicros"] for b in by_persona] == sorted((b["costUsdMicros"] for b in by_persona), reverse=True)
    by_key = {b["key"]: b for b in usage(http, tenant, groupBy="key")["buckets"]}
    assert by_key[seen["key"]]["generations"] == 1 and by_key[seen["key"]]["costUsdMicros"] == cost(seen["replies"][4:])
    assert sum(b["generations"] for b in by_key.values()) == 5 and all(k.startswith("key_") for k in by_key)
    only = usage(http, tenant, groupBy="day", personaId=seen["sea"])
    assert only["totals"]["generations"] == 1
    assert usage(http, tenant, keyId=seen["key"])["totals"]["costUsdMicros"] == cost(seen["replies"][4:])


def test_removed_messages_still_count(http, used):
    tenant, seen = used
    before = usage(http, tenant)["totals"]
    reply = seen["replies"][2]
    sid = reply["sessionId"]
    r = http.delete(f"/v1/chat/sessions/{sid}/messages/{reply['id']}", headers=tenant.auth)
    assert r.status_code == 200, r.text
    assert usage(http, tenant)["totals"] == before


@pytest.mark.parametrize(("params", "path"), [
    ({"start": "yesterday"}, "start"),
    ({"end": "2026-13-01"}, "end"),
    ({"start": "2026-11-20T00:00:00"}, "start"),  # no offset: ambiguous
    ({"start": "2026-11-20", "end": "2026-11-10"}, "end"),
    ({"start": "2024-01-01", "end": "2026-01-01"}, "end"),
    ({"groupBy": "week"}, "groupBy"),
])
def test_bad_ranges_are_422_naming_the_field(http, used, params, path):
    tenant, _ = used
    error = assert_envelope(http.get("/v1/usage", params=params, headers=tenant.auth), 422, "validation_failed")
    assert [v["path"] for v in error["details"]["validationErrors"]] == [path]


def test_other_tenants_see_none_of_it(http, tenants, used):
    stranger = tenants()
    body = usage(http, stranger)
    assert body["totals"]["generations"] == 0 and len(body["buckets"]) == 30
