"""The marketplace through Envoy: a listing is published only after its
review (moderation of the persona and the listing), found by audience tag
and words from another organization, bought by an Enterprise organization
(a copy of the persona, an invoice, the seller's event and credit), refused
for Pro, and a flagged listing is rejected into the moderation queue."""

from __future__ import annotations

import time
import uuid

import pytest
from sqlalchemy import text


def persona_of(http, tenant, intent: str) -> dict:
    r = http.post("/v1/personas", json={"intent": intent}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()


def reviewed(http, tenant, listing_id: str) -> dict:
    deadline = time.monotonic() + 10
    while True:
        r = http.get(f"/v1/marketplace/listings/{listing_id}", headers=tenant.auth)
        assert r.status_code == 200, r.text
        if r.json()["status"] != "pending_review" or time.monotonic() > deadline:
            return r.json()
        time.sleep(0.05)


@pytest.fixture(scope="module")
def seller(tenants):
    return tenants(plan="team")


@pytest.fixture(scope="module")
def published(http, seller) -> dict:
    persona = persona_of(http, seller, "A cheerful sommelier who explains wine to beginners")
    r = http.post("/v1/marketplace/listings", headers=seller.auth, json={
        "personaId": persona["id"], "title": "Wine tutor for beginners", "description": "Gentle tastings at home",
        "audienceTags": ["Hospitality", "education"], "priceMinor": 1500,
    })
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "pending_review" and r.json()["audienceTags"] == ["education", "hospitality"]
    assert r.json()["priceMinor"] == 1500  # a JSON number, not "1500"
    listing = reviewed(http, seller, r.json()["id"])
    assert listing["status"] == "published", listing
    return listing


def test_published_only_after_review_with_its_event(engine, seller, published):
    with engine.connect() as conn:
        data = conn.execute(text("SELECT data FROM events WHERE org_id = :o AND type = 'marketplace.persona.published'"
                                 " AND data->>'listingId' = :l"), {"o": seller.org_id, "l": published["id"]}).scalar()
    assert data["title"] == "Wine tutor for beginners"


def test_another_organization_finds_it_by_audience_tag_and_words(http, tenants, published):
    other = tenants(plan="pro")
    found = http.get("/v1/marketplace/listings", params={"audienceTag": "hospitality"}, headers=other.auth)
    assert found.status_code == 200, found.text
    found = found.json()
    assert published["id"] in [item["id"] for item in found["items"]]
    assert all(item["status"] == "published" for item in found["items"])
    found = http.get("/v1/marketplace/listings", params={"audienceTag": "hospitality", "q": "wine tutor"},
                     headers=other.auth).json()["items"]
    assert [item["id"] for item in found if item["id"] == published["id"]] and not found[0]["mine"]
    none = http.get("/v1/marketplace/listings", params={"audienceTag": "hospitality", "q": "submarine"},
                    headers=other.auth).json()["items"]
    assert published["id"] not in [item["id"] for item in none]
    assert http.get("/v1/marketplace/listings", params={"mine": "true"}, headers=other.auth).json()["items"] == []


def test_words_match_title_or_description_as_substrings_whatever_their_length(http, tenants):
    """`q` reads the trigram indexes (migration 0028) where a word has a
    trigram and the listings where it has none (1 or 2 characters): the same
    answers either way. Words ignore case; `_` is a plain character (`%`
    separates words, as every character but letters, digits and `_`)."""
    seller = tenants(plan="team")
    listings = {}
    for key, title, description in (("quiz", "Quiz_night", "Trivia for teams"),
                                    ("board", "QuizXnight", "Board games"),
                                    ("wine", "Wine 50% off", "Tastings")):
        persona = persona_of(http, seller, f"A host of {description.lower()}")
        r = http.post("/v1/marketplace/listings", headers=seller.auth, json={
            "personaId": persona["id"], "title": title, "description": description, "audienceTags": ["games"],
            "priceMinor": 100})
        assert r.status_code == 200, r.text
        listings[key] = r.json()["id"]
    newest_first = {listing: n for n, listing in enumerate(reversed(listings.values()))}

    def found(q: str) -> list[str]:
        r = http.get("/v1/marketplace/listings", params={"mine": "true", "q": q}, headers=seller.auth)
        assert r.status_code == 200, r.text
        ids = [item["id"] for item in r.json()["items"]]
        assert ids == sorted(ids, key=newest_first.__getitem__), q
        return sorted(key for key, listing in listings.items() if listing in ids)

    assert found("quiz_night") == ["quiz"]  # `_` is no wildcard: QuizXnight does not match
    assert found("QUIZXNIGHT") == ["board"]
    assert found("TEAMS trivia") == ["quiz"]  # every word, in the title or the description
    assert found("quiz games") == ["board"]
    assert found("50%") == ["wine"]
    assert found("off 50") == ["wine"]
    assert found("submarine") == []
    for q, expected in (("x", ["board"]), ("N", ["board", "quiz", "wine"]), ("ni", ["board", "quiz"]),
                        ("TI", ["wine"]), ("_", ["quiz"]), ("5", ["wine"]), ("z g", ["board", "quiz"])):
        assert found(q) == expected, q


def test_enterprise_buys_once_and_pro_is_refused(http, engine, tenants, seller, published):
    pro = tenants(plan="pro")
    r = http.post(f"/v1/marketplace/listings/{published['id']}/purchase", json={}, headers=pro.auth)
    assert r.status_code == 403 and r.json()["error"]["details"]["requiredPlan"] == "enterprise"

    buyer = tenants(plan="enterprise")
    r = http.post(f"/v1/marketplace/listings/{published['id']}/purchase", json={}, headers=buyer.auth)
    assert r.status_code == 200, r.text
    bought = r.json()
    assert bought["amountMinor"] == 1500
    again = http.post(f"/v1/marketplace/listings/{published['id']}/purchase", json={}, headers=buyer.auth)
    assert again.status_code == 200 and again.json() == bought

    copy = http.get(f"/v1/personas/{bought['personaId']}", headers=buyer.auth)
    assert copy.status_code == 200 and copy.json()["metadata"]["marketplaceListingId"] == published["id"]
    invoice = http.get(f"/v1/billing/invoices/{bought['invoiceId']}", headers=buyer.auth).json()
    assert invoice["amountDueMinor"] == 1500 and invoice["status"] == "paid"
    with engine.connect() as conn:
        sold = conn.execute(text("SELECT data FROM events WHERE org_id = :o AND type = 'marketplace.persona.purchased'"),
                            {"o": seller.org_id}).scalars().all()
        created = conn.execute(text("SELECT count(*) FROM events WHERE org_id = :o AND type = 'persona.created' "
                                    "AND data->>'personaId' = :p"), {"o": buyer.org_id, "p": bought["personaId"]}).scalar()
    assert [e["purchaseId"] for e in sold] == [bought["id"]] and sold[0]["feeMinor"] == 300
    assert created == 1
    # The seller's next invoice carries the sale minus the platform fee (20%).
    lines = http.get("/v1/billing/subscription", headers=seller.auth)
    assert lines.status_code == 200
    with engine.connect() as conn:
        pending = conn.execute(text("SELECT pending_lines FROM subscriptions WHERE org_id = :o"),
                               {"o": seller.org_id}).scalar()
    assert [line["amountMinor"] for line in pending] == [-1200]

    r = http.post(f"/v1/marketplace/listings/{published['id']}/purchase", json={}, headers=seller.auth)
    assert r.status_code in (403, 409)  # a Team seller is refused by plan first


def test_a_flagged_listing_is_rejected_into_the_moderation_queue(http, engine, seller):
    persona = persona_of(http, seller, "A gruff harbour master who tells old sea stories")
    r = http.post("/v1/marketplace/listings", headers=seller.auth, json={
        "personaId": persona["id"], "title": "Learn to build a bomb", "audienceTags": ["chemistry"], "priceMinor": 100,
    })
    listing = reviewed(http, seller, r.json()["id"])
    assert listing["status"] == "rejected" and "violence" in listing["rejectionReason"]
    with engine.connect() as conn:
        queued = conn.execute(text("SELECT count(*) FROM moderation_reviews WHERE subject_type = 'marketplace_listing'"
                                   " AND subject_id = :l"), {"l": listing["id"]}).scalar()
    assert queued == 1
    other = http.get(f"/v1/marketplace/listings/{listing['id']}", headers={})
    assert other.status_code == 401


def test_unpublish_and_update_send_it_back_to_review(http, tenants, seller):
    persona = persona_of(http, seller, "A tidy librarian who recommends detective novels")
    r = http.post("/v1/marketplace/listings", headers=seller.auth, json={
        "personaId": persona["id"], "title": "Mystery guide", "audienceTags": ["books"], "priceMinor": 0})
    listing = reviewed(http, seller, r.json()["id"])
    assert listing["status"] == "published"
    r = http.post(f"/v1/marketplace/listings/{listing['id']}/unpublish", json={}, headers=seller.auth)
    assert r.json()["status"] == "unpublished"
    stranger = tenants(plan="pro")
    assert http.get(f"/v1/marketplace/listings/{listing['id']}", headers=stranger.auth).status_code == 404
    r = http.patch(f"/v1/marketplace/listings/{listing['id']}", json={"title": "Mystery and crime guide"},
                   headers=seller.auth)
    assert r.status_code == 200 and r.json()["status"] == "pending_review"
    assert reviewed(http, seller, listing["id"])["title"] == "Mystery and crime guide"
    r = http.patch(f"/v1/marketplace/listings/{listing['id']}", json={"title": "x"}, headers=stranger.auth)
    assert r.status_code == 404


def test_a_tags_listings_come_newest_first_as_they_are_created_changed_and_deleted(http, engine, tenants):
    """`listing_tags` (migration 0019, kept by a trigger): a tag's page is
    its published listings newest first, across cursor pages; a listing
    leaves the tag's list when the tag is removed or it is unpublished (it
    stays in the organization's own list) and when it is deleted, and joins
    another tag's when given it."""
    seller, reader = tenants(plan="team"), tenants(plan="pro")
    tag, other = f"t{uuid.uuid4().hex[:10]}", f"u{uuid.uuid4().hex[:10]}"

    def listed(tenant, audience_tag: str, **params) -> list[str]:
        ids, cursor = [], ""
        while True:  # a page at a time, one listing a page: the cursor's keyset too
            r = http.get("/v1/marketplace/listings", headers=tenant.auth,
                         params={"audienceTag": audience_tag, "limit": 1, "cursor": cursor, **params})
            assert r.status_code == 200, r.text
            ids += [item["id"] for item in r.json()["items"]]
            cursor = r.json().get("nextCursor", "")
            if not cursor:
                return ids

    created = []
    for i in range(4):
        persona = persona_of(http, seller, f"A patient tutor number {i} who explains tides")
        r = http.post("/v1/marketplace/listings", headers=seller.auth, json={
            "personaId": persona["id"], "title": f"Tides {i}", "audienceTags": [tag.upper(), "education"],
            "priceMinor": 100})
        assert r.status_code == 200, r.text
        created.append(r.json()["id"])
    assert all(reviewed(http, seller, i)["status"] == "published" for i in created)
    newest_first = created[::-1]
    assert listed(reader, tag) == newest_first
    assert listed(reader, tag.upper()) == newest_first  # tags are lowered

    r = http.patch(f"/v1/marketplace/listings/{created[1]}", headers=seller.auth, json={"audienceTags": [other]})
    assert r.status_code == 200, r.text
    assert reviewed(http, seller, created[1])["status"] == "published"
    assert listed(reader, tag) == [created[3], created[2], created[0]]
    assert listed(reader, other) == [created[1]]

    r = http.post(f"/v1/marketplace/listings/{created[2]}/unpublish", json={}, headers=seller.auth)
    assert r.json()["status"] == "unpublished"
    assert listed(reader, tag) == [created[3], created[0]]
    assert listed(seller, tag, mine="true") == [created[3], created[2], created[0]]  # its own, any status

    with engine.begin() as conn:  # no call deletes a listing; an organization's deletion cascades to them
        conn.execute(text("DELETE FROM marketplace_listings WHERE id = :l"), {"l": created[3]})
        left = conn.execute(text("SELECT count(*) FROM listing_tags WHERE listing_id = :l"), {"l": created[3]})
        assert left.scalar() == 0
    assert listed(reader, tag) == [created[0]]
    assert listed(seller, tag, mine="true") == [created[2], created[0]]


def test_two_purchases_at_once_are_the_one_purchase(http, engine, tenants, published):
    """The same buyer twice at the same moment, with different Idempotency-Keys: as one after the other,
    both answer 200 with the same purchase, and the listing is bought (and charged) once."""
    from races import at_once

    buyer = tenants(plan="enterprise")
    url = f"/v1/marketplace/listings/{published['id']}/purchase"
    buy = lambda: http.post(url, json={}, headers={**buyer.auth, "Idempotency-Key": str(uuid.uuid4())})  # noqa: E731
    first, second = at_once(engine, "marketplace_purchases", buy, buy)
    assert (first.status_code, second.status_code) == (200, 200), (first.text, second.text)
    assert first.json() == second.json()
    with engine.connect() as conn:
        bought = conn.execute(text("SELECT count(*) FROM marketplace_purchases WHERE buyer_org_id = :o"),
                              {"o": buyer.org_id}).scalar_one()
        copies = conn.execute(text("SELECT count(*) FROM personas WHERE org_id = :o"), {"o": buyer.org_id}).scalar_one()
    assert (bought, copies) == (1, 1)
