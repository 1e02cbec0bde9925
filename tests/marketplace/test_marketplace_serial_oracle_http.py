"""A listing's writes at once answer as one serial order would (tests/oracle.py), through Envoy: purchases by
an Enterprise buyer (another organization than the seller) beside the seller's unpublish, and the seller's
update beside the unpublish, each pair fired together behind a barrier and compared with both serial orders.

Two tables, because an update sends the listing back to review, which the runner does as a write of its own
after the update commits: a purchase after an update answers 404 (pending review) or 200 (published again)
depending on whether that third write ran, in a serial run as in a concurrent one, so the pair has no one serial
answer to compare with. The update's table reads the end state once the review settled (`support.wait_until`)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import Op, Table, body, check_named, fixture_body, params, uncovered
from support import wait_until


@dataclass(frozen=True)
class Fixture:
    seller: dict[str, str]
    buyer: dict[str, str]
    listing: str


def _settled(http, auth: dict[str, str], listing_id: str) -> dict:
    """The listing once its review ran (not pending_review)."""
    def seen():
        got = http.get(f"/v1/marketplace/listings/{listing_id}", headers=auth)
        assert got.status_code == 200, got.text
        return got.json() if got.json()["status"] != "pending_review" else None
    return wait_until(seen, what=f"listing {listing_id} reviewed")


def _fixture(http, seller, persona: str, tenants) -> Fixture:
    """A published listing of the seller's persona, and an Enterprise buyer of another organization."""
    # State: the title and a price (the state reads both, and the buyer's invoices, which a free listing has none
    # of; the generator's title is new each run and its price the smallest, 0).
    made = http.post("/v1/marketplace/listings", headers=seller.auth, json=fixture_body(
        "CreateListing", {"persona": persona}, state={"title": "Lighthouse keeper", "priceMinor": 700}))
    assert made.status_code == 200, made.text
    assert _settled(http, seller.auth, made.json()["id"])["status"] == "published"
    buyer = tenants(plan="enterprise") if tenants is not None else None
    return Fixture(seller.auth, buyer.auth if buyer is not None else {}, made.json()["id"])


def _unpublish(http) -> Op:
    return Op("unpublish", lambda f: http.post(f"/v1/marketplace/listings/{f.listing}/unpublish",
                                               json=body("UnpublishListing"), headers=f.seller), "UnpublishListing")


def _state(http, f: Fixture, *, settle: bool):
    """The listing as its seller sees it (status, title, price), and what the buyer holds of it (copies of the
    persona made of it, invoices)."""
    if settle:
        listing = _settled(http, f.seller, f.listing)
    else:
        got = http.get(f"/v1/marketplace/listings/{f.listing}", headers=f.seller)
        assert got.status_code == 200, got.text
        listing = got.json()
    copies = invoices = 0
    if f.buyer:
        personas = http.get("/v1/personas", headers=f.buyer)
        assert personas.status_code == 200, personas.text
        copies = len(personas.json()["items"])
        billed = http.get("/v1/billing/invoices", headers=f.buyer)
        assert billed.status_code == 200, billed.text
        invoices = sorted(i["amountDueMinor"] for i in billed.json()["items"])
    return listing["status"], listing["title"], listing["priceMinor"], copies, invoices


def _table_purchases(http, seller, persona, tenants) -> Table:
    """Purchases by one buyer (the double click) and the seller's unpublish."""
    ops = [Op("purchase", lambda f: http.post(f"/v1/marketplace/listings/{f.listing}/purchase",
                                              json=body("PurchaseListing"), headers=f.buyer), "PurchaseListing"),
           _unpublish(http)]
    return Table("a published listing and a buyer", make=lambda: _fixture(http, seller, persona, tenants),
                 read=lambda f: _state(http, f, settle=False), ops=ops)


def _table_updates(http, seller, persona) -> Table:
    """The seller's update (back to review, then published again) and unpublish."""
    # Distinguishing: the title and the price (the state reads both; the generator's title is new each run).
    ops = [Op("update", lambda f: http.patch(f"/v1/marketplace/listings/{f.listing}", headers=f.seller, json=body(
               "UpdateListing", distinguishing={"title": "Lighthouse keeper's tales", "priceMinor": 900})),
              "UpdateListing"),
           _unpublish(http)]
    return Table("a published listing", make=lambda: _fixture(http, seller, persona, None),
                 read=lambda f: _state(http, f, settle=True), ops=ops)


@pytest.fixture(scope="module")
def seller(tenants):
    return tenants(plan="team")


@pytest.fixture(scope="module")
def persona(http, seller) -> str:
    # (The generator's intent: the state reads the listing and counts the buyer's copies, nothing of the persona.)
    made = http.post("/v1/personas", json=fixture_body("CreatePersona"), headers=seller.auth)
    assert made.status_code == 200, made.text
    return made.json()["id"]


@pytest.mark.parametrize(("a", "b"), params(_table_purchases(None, None, None, None)))
def test_a_purchase_and_the_sellers_writes_at_once_answer_as_one_serial_order(http, tenants, seller, persona, a, b):
    assert check_named(_table_purchases(http, seller, persona, tenants), a, b) == []


@pytest.mark.parametrize(("a", "b"), params(_table_updates(None, None, None)))
def test_the_sellers_writes_at_once_answer_as_one_serial_order(http, seller, persona, a, b):
    assert check_named(_table_updates(http, seller, persona), a, b) == []


def test_the_oracle_tries_every_write_of_a_listing():
    """All but the create (a new listing: two at once never share one; the persona's table fires one beside the
    persona's writes, tests/personas/test_persona_serial_oracle_http.py)."""
    tables = [_table_purchases(None, None, None, None), _table_updates(None, None, None)]
    assert uncovered("MarketplaceService", tables, {"CreateListing"}) == set()
