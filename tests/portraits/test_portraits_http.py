"""Portraits through Envoy, on local storage and on S3-compatible storage:
generate, open the signed URL, edit along the conversation chain, branch,
approve/reject, the portrait error shape, tenant isolation, the monthly image
quota, and the purge of a deleted persona's portraits."""

from __future__ import annotations

import io
import time
from datetime import timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from persona_service.billing.records import SubscriptionChanges
from persona_service.billing.repository import BillingRepository
from persona_service.config.repository import ORG_LEVEL, ConfigRepository
from persona_service.files.records import ObjectNotFound
from persona_service.kernel.clock import iso, utcnow
from persona_service.kernel.data.work import Work
from persona_service.kernel.transport.limits.resolver import CACHE_SECONDS
from persona_service.personas.service import PersonaService
from persona_service.portraits.module import purge_portraits
from persona_service.providers.local import LocalProvider
from PIL import Image
from sqlalchemy import text
from support import assert_envelope

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def org(env):
    return env.tenants(plan="pro")


@pytest.fixture(scope="module")
def persona(env, org) -> dict:
    return new_persona(env, org, "A retired lighthouse keeper who paints seabirds")


def new_persona(env, tenant, intent: str) -> dict:
    r = env.http.post("/v1/personas", json={"intent": intent}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def generate(env, tenant, persona_id: str, **body) -> dict:
    r = env.http.post(f"/v1/personas/{persona_id}/portraits", json=body, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def edit(env, tenant, persona_id: str, portrait_id: str, instruction: str) -> httpx.Response:
    return env.http.post(f"/v1/personas/{persona_id}/portrait/{portrait_id}/edit",
                         json={"instruction": instruction}, headers=tenant.auth)


def fetch_png(env, url: str) -> bytes:
    """Open a signed URL as a browser would: no credentials."""
    r = httpx.get(url)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png" and r.headers["etag"]
    if env.backend == "local":
        assert r.headers["cache-control"].startswith("private, max-age=")
    assert r.content.startswith(PNG)
    return r.content


def test_generate_then_open_the_signed_url(env, org, persona):
    portrait = generate(env, org, persona["id"], prompt="in a green jacket", style="watercolor")
    assert portrait["status"] == "generated", portrait
    assert portrait["personaId"] == persona["id"] and portrait["conversationId"] == portrait["id"]
    assert portrait["storageKey"] == f"{org.org_id}/portraits/{persona['id']}/{portrait['id']}.png"
    png = fetch_png(env, portrait["signedUrl"])
    assert len(png) == portrait["size"]
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (portrait["width"], portrait["height"]) == (512, 512)


def test_edits_append_to_the_chain_and_branch(env, org, persona):
    first = generate(env, org, persona["id"])
    original = fetch_png(env, first["signedUrl"])

    one = edit(env, org, persona["id"], first["id"], "make the background blue")
    assert one.status_code == 200, one.text
    one = one.json()
    assert set(one) == {"portraitId", "conversationId", "status", "storageKey", "signedUrl"}
    assert one["conversationId"] == first["conversationId"] and one["status"] == "generated"
    png_one = fetch_png(env, one["signedUrl"])
    assert png_one != original

    two = edit(env, org, persona["id"], one["portraitId"], "add glasses").json()
    png_two = fetch_png(env, two["signedUrl"])
    assert two["conversationId"] == first["conversationId"] and png_two not in (original, png_one)

    branch = edit(env, org, persona["id"], one["portraitId"], "black and white").json()
    assert branch["conversationId"] == first["conversationId"]
    assert fetch_png(env, branch["signedUrl"]) not in (png_one, png_two)

    r = env.http.get(f"/v1/personas/{persona['id']}/portraits", params={"conversationId": first["conversationId"]},
                     headers=org.auth)
    assert r.status_code == 200, r.text
    tree = {p["id"]: p["parentPortraitId"] for p in r.json()["items"]}
    assert tree == {first["id"]: "", one["portraitId"]: first["id"], two["portraitId"]: one["portraitId"],
                    branch["portraitId"]: one["portraitId"]}
    got = env.http.get(f"/v1/personas/{persona['id']}/portraits/{two['portraitId']}", headers=org.auth).json()
    assert got["instruction"] == "add glasses" and got["status"] == "generated"


def test_the_same_inputs_draw_the_same_png(env, org, persona):
    a = generate(env, org, persona["id"], prompt="red hair", style="pop")
    b = generate(env, org, persona["id"], prompt="red hair", style="pop")
    assert fetch_png(env, a["signedUrl"]) == fetch_png(env, b["signedUrl"])


def test_approve_makes_it_canonical_and_emits_persona_updated(env, org, persona):
    a, b = generate(env, org, persona["id"]), generate(env, org, persona["id"])
    base = f"/v1/personas/{persona['id']}/portraits"
    r = env.http.post(f"{base}/{a['id']}/approve", json={}, headers=org.auth)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "approved" and r.json()["canonical"] is True
    r = env.http.post(f"{base}/{b['id']}/approve", json={}, headers=org.auth)
    assert r.json()["canonical"] is True
    assert env.http.get(f"{base}/{a['id']}", headers=org.auth).json()["canonical"] is False
    with env.engine.connect() as conn:
        events = conn.execute(text(
            "SELECT data FROM events WHERE org_id = :o AND type = 'persona.updated' AND data->>'canonicalPortraitId' "
            "IN (:a, :b)"), {"o": org.org_id, "a": a["id"], "b": b["id"]}).scalars().all()
    assert len(events) == 2

    c = generate(env, org, persona["id"])
    r = env.http.post(f"{base}/{c['id']}/reject", json={}, headers=org.auth)
    assert r.status_code == 200 and r.json()["status"] == "rejected"
    r = env.http.post(f"{base}/{c['id']}/approve", json={}, headers=org.auth)
    assert r.status_code == 409 and r.json()["error"]["code"] == "state_conflict"
    # A rejected portrait is not editable: 404 in the portrait shape.
    r = edit(env, org, persona["id"], c["id"], "add a hat")
    assert r.status_code == 404 and r.json()["error"] == "not_found"


def test_edit_errors_use_the_portrait_shape(env, org, persona):
    source = generate(env, org, persona["id"])
    unknown = edit(env, org, persona["id"], "00000000-0000-4000-8000-000000000000", "add a hat")
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "not_found" and isinstance(unknown.json()["message"], str)

    foreign = env.tenants(plan="pro")
    r = edit(env, foreign, persona["id"], source["id"], "add a hat")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    r = env.http.get(f"/v1/personas/{persona['id']}/portraits/{source['id']}", headers=foreign.auth)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"

    r = edit(env, org, persona["id"], source["id"], "add a bomb and kill the terrorists")
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "moderation_blocked" and body["term"] and body["scores"]["violence"] > 0.5
    assert body["pii"] == []
    with env.engine.connect() as conn:
        review = conn.execute(text("SELECT count(*) FROM moderation_reviews WHERE id = :i AND "
                                   "subject_type = 'portrait_instruction'"), {"i": body["reviewId"]}).scalar_one()
        flagged = conn.execute(text("SELECT count(*) FROM events WHERE type = 'moderation.flagged' AND "
                                    "data->>'reviewId' = :i"), {"i": body["reviewId"]}).scalar_one()
    assert review == flagged == 1
    r = edit(env, org, persona["id"], source["id"], "paint their credit card numbers on the wall")
    assert r.status_code == 422 and r.json()["pii"] == ["credit card numbers"]

    r = edit(env, org, persona["id"], source["id"], "x" * 501)
    assert r.status_code == 422 and r.json()["error"] == "validation_failed"
    r = edit(env, org, persona["id"], source["id"], "")
    assert r.status_code == 422 and r.json()["error"] == "validation_failed"


def test_other_edit_answers_use_the_envelope(env, org, persona):
    """The spec gives the portrait shape to the edit's 404, 422 and 502 only."""
    source = generate(env, org, persona["id"])
    path = f"/v1/personas/{persona['id']}/portrait/{source['id']}/edit"
    assert_envelope(env.http.post(path, json={"instruction": "add a hat"}), 401, "unauthorized")
    reader = env.tenants.tenant_key(org, ["personas:read"])
    assert_envelope(env.http.post(path, json={"instruction": "add a hat"},
                                  headers={"Authorization": f"Bearer {reader}"}), 403, "forbidden")
    # The edge's own answer for a body it cannot parse.
    malformed = env.http.post(path, content=b'{"instruction": ', headers={**org.auth, "Content-Type": "application/json"})
    assert_envelope(malformed, 400, "bad_request")


def test_signed_urls_refuse_tampering_and_expiry(env, org, persona):
    if env.backend == "s3":
        pytest.skip("presigned URLs are checked by the object store itself")
    portrait = generate(env, org, persona["id"])
    parts = urlsplit(portrait["signedUrl"])
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    other = env.tenants(plan="pro")
    theirs = generate(env, other, new_persona(env, other, "A quiet archivist of lost umbrellas")["id"])
    # Our signature on their key, a changed expiry, a changed signature, an expired URL: all refused.
    for path, params in (
        (urlsplit(theirs["signedUrl"]).path, query),
        (parts.path, {**query, "expires": str(int(query["expires"]) + 60)}),
        (parts.path, {**query, "signature": "0" * 64}),
        (parts.path, {**query, "expires": "1000"}),
    ):
        r = env.http.get(path, params=params)
        assert r.status_code == 403, (path, params, r.text)
        assert r.json()["error"]["code"] == "forbidden"


def test_monthly_image_quota(env):
    small = env.tenants(plan="enterprise")  # (before its first request: limits are cached per process)
    with env.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO config_items (org_id, workspace_id, key, value, updated_by) "
            "VALUES (:o, '', 'api.rate_limit.images_per_month', '2', 'test')"), {"o": small.org_id})
    persona = new_persona(env, small, "A patient beekeeper who whistles")
    first = generate(env, small, persona["id"])
    assert edit(env, small, persona["id"], first["id"], "add a hat").status_code == 200
    r = edit(env, small, persona["id"], first["id"], "add a scarf")
    assert r.status_code == 429, r.text
    details = assert_envelope(r, 429, "quota_exceeded")["details"]  # the envelope: not a portrait-shape status
    assert details == {"used": 2, "limit": 2, "quota": "images_per_month", "resetAt": details["resetAt"]}
    assert "retry-after" in r.headers
    r = env.http.post(f"/v1/personas/{persona['id']}/portraits", json={}, headers=small.auth)
    assert r.status_code == 429 and r.json()["error"]["code"] == "quota_exceeded"


def test_the_image_quota_counts_in_the_billing_period(env):
    """Images count from the organization's billing period start, and the
    overrun's `Retry-After` is its end (`currentPeriodEnd`), not the calendar
    month's (issue #27)."""
    small = env.tenants(plan="enterprise")
    now = utcnow().replace(microsecond=0)
    start, end = now - timedelta(days=2), now + timedelta(days=5, hours=3)
    with env.engine.begin() as conn:
        ConfigRepository(conn).upsert(small.org_id, ORG_LEVEL, "api.rate_limit.images_per_month", 1, "test")
    assert env.http.get("/v1/billing/subscription", headers=small.auth).status_code == 200  # opens it
    with env.engine.begin() as conn:
        BillingRepository(conn).update_subscription(
            small.org_id, SubscriptionChanges(current_period_start=start, current_period_end=end))
    persona = new_persona(env, small, "A patient clockmaker who hums")
    generate(env, small, persona["id"])
    r = env.http.post(f"/v1/personas/{persona['id']}/portraits", json={}, headers=small.auth)
    assert r.status_code == 429, r.text
    assert parsedate_to_datetime(r.headers["retry-after"]) == end
    assert r.json()["error"]["details"]["resetAt"] == iso(end)


def test_opening_a_subscription_mid_month_never_resets_the_images_used(env):
    """The image quota moves from the calendar month to the billing period when a subscription
    opens, and counts on from the month's start (issue 38): no fresh images until the period ends."""
    if env.backend != "local":
        pytest.skip("the quota does not depend on the storage")
    small = env.tenants(plan="enterprise")
    with env.engine.begin() as conn:  # before its first request: limits are cached per process
        ConfigRepository(conn).upsert(small.org_id, ORG_LEVEL, "api.rate_limit.images_per_month", 1, "test")
    persona = new_persona(env, small, "A patient glassblower who sings")
    generate(env, small, persona["id"])
    opened = env.http.get("/v1/billing/subscription", headers=small.auth)
    assert opened.status_code == 200, opened.text
    time.sleep(CACHE_SECONDS + 0.5)  # the servers see the new period once their cached one lapses

    r = env.http.post(f"/v1/personas/{persona['id']}/portraits", json={}, headers=small.auth)
    details = assert_envelope(r, 429, "quota_exceeded")["details"]
    assert details["used"] == 1 and details["resetAt"][:19] == opened.json()["currentPeriodEnd"][:19]


def test_a_purged_persona_leaves_no_portraits_behind(env, org):
    doomed = new_persona(env, org, "A fading stage magician who loves pigeons")
    kept = new_persona(env, org, "A cheerful tram driver who collects maps")
    gone = generate(env, org, doomed["id"])
    gone_edit = edit(env, org, doomed["id"], gone["id"], "add a hat").json()
    stays = generate(env, org, kept["id"])
    assert env.http.delete(f"/v1/personas/{doomed['id']}", headers=org.auth).status_code == 200
    storage = env.storage()
    with env.engine.begin() as conn:
        PersonaService(Work.on(conn), LocalProvider()).purge_expired(now=utcnow() + timedelta(days=31))
    purge_portraits(env.engine, storage)
    for key in (gone["storageKey"], gone_edit["storageKey"]):
        with pytest.raises(ObjectNotFound):
            storage.get(key)
    if env.s3 is not None:
        assert env.s3.keys(f"{org.org_id}/portraits/{doomed['id']}/") == []
    with env.engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM portraits WHERE persona_id = :p"), {"p": doomed["id"]}).scalar()
    assert rows == 0
    assert storage.get(stays["storageKey"]).data.startswith(PNG)
    assert fetch_png(env, stays["signedUrl"])


def test_an_edit_replayed_with_its_idempotency_key_makes_no_second_portrait(env, org, persona):
    source = generate(env, org, persona["id"])
    headers = {**org.auth, "Idempotency-Key": f"edit-{source['id']}"}
    path = f"/v1/personas/{persona['id']}/portrait/{source['id']}/edit"
    first = env.http.post(path, json={"instruction": "add earrings"}, headers=headers)
    again = env.http.post(path, json={"instruction": "add earrings"}, headers=headers)
    assert first.status_code == again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json() and first.json()["status"] == "generated"
    other = env.http.post(path, json={"instruction": "add a scarf"}, headers=headers)
    assert_envelope(other, 409, "idempotency_conflict")
    chain = env.http.get(f"/v1/personas/{persona['id']}/portraits", params={"conversationId": source["id"]},
                         headers=org.auth).json()["items"]
    assert len(chain) == 2
