"""A purchase beside the writes of the other aggregates it decides on answers as one serial order would
(tests/oracle.py), through Envoy. A purchase locks the buyer's and the seller's subscriptions (first, in id order:
subscriptions are declared before personas and listings), holds its listing FOR SHARE, copies the listed persona
(held FOR SHARE), charges the buyer's subscription and credits the seller's: so it is fired beside the seller's
update of the listing (a new title and price) and a price change alone, beside the PATCH and the DELETE of the
listed persona, and beside the other organization buying the buyer's own listing (two purchases whose
subscriptions are each other's).

An update sends the listing back to review, which the runner does as a write of its own: the buyer here buys the
listing once it is settled (a 404 while it waits for review is retried once the review ran), so a purchase after
an update answers as the review left it, in a serial run as in a concurrent one. Besides the end state, each pair
checks that no call was aborted by PostgreSQL and run again (`races.reruns`): a rerun is a lock-order cycle."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from oracle import ROUNDS, Op, Table, body, check_named, fixture_body, params
from races import reruns
from support import wait_until

PAIR_ROUNDS = max(ROUNDS, 3)
LISTINGS = "/v1/marketplace/listings"


@dataclass(frozen=True)
class Fixture:
    seller: dict[str, str]
    buyer: dict[str, str]
    persona: str  # the seller's, listed
    listing: str
    buyers_listing: str = ""  # the buyer's own listing, which the seller buys (the crosswise table)


def _settled(http, auth: dict[str, str], listing_id: str) -> dict:
    def seen():
        got = http.get(f"{LISTINGS}/{listing_id}", headers=auth)
        assert got.status_code == 200, got.text
        return got.json() if got.json()["status"] != "pending_review" else None
    return wait_until(seen, what=f"listing {listing_id} reviewed")


def _listed(http, org) -> tuple[str, str]:
    """A new persona of `org` and a published listing of it."""
    # State: one intent in every run (the state reads the display names of the persona and the buyer's copy, which
    # the model derives from it; the generator's is new each time).
    persona = http.post("/v1/personas", headers=org.auth, json=fixture_body(
        "CreatePersona", state={"intent": "A lighthouse keeper who tells storm stories"}))
    assert persona.status_code == 200, persona.text
    # State: the title and a price (the state reads both and the invoices, which a free listing has none of; the
    # generator's title is new each run and its price the smallest, 0).
    made = http.post(LISTINGS, headers=org.auth, json=fixture_body(
        "CreateListing", {"persona": persona.json()["id"]}, state={"title": "Lighthouse keeper", "priceMinor": 700}))
    assert made.status_code == 200, made.text
    assert _settled(http, org.auth, made.json()["id"])["status"] == "published"
    return persona.json()["id"], made.json()["id"]


def _fixture(http, tenants, *, crosswise: bool) -> Fixture:
    """Two Enterprise organizations: the seller's listing of its persona; crosswise, the buyer's listing too."""
    seller, buyer = tenants(plan="enterprise"), tenants(plan="enterprise")
    persona, listing = _listed(http, seller)
    return Fixture(seller.auth, buyer.auth, persona, listing, _listed(http, buyer)[1] if crosswise else "")


def _purchase(http, buyer: str, listing: str):
    """`buyer` ("buyer" or "seller") buys `listing` ("listing", "buyers_listing") once it is settled: a 404 met
    while the listing was in review is asked again once the review published it."""
    def call(f: Fixture):
        auth, owner = getattr(f, buyer), f.buyer if buyer == "seller" else f.seller
        listing_id = getattr(f, listing)
        bought = http.post(f"{LISTINGS}/{listing_id}/purchase", json=body("PurchaseListing"), headers=auth)
        # (Published again since: the 404 met it in review, which may have ended before this looks.)
        if bought.status_code == 404 and _settled(http, owner, listing_id)["status"] == "published":
            bought = http.post(f"{LISTINGS}/{listing_id}/purchase", json=body("PurchaseListing"), headers=auth)
        return bought
    return call


def _ops(http) -> list[Op]:
    return [
        Op("purchase", _purchase(http, "buyer", "listing"), "PurchaseListing"),
        # Distinguishing: the title and the price (the state reads both; the generator's title is new each run).
        Op("update", lambda f: http.patch(f"{LISTINGS}/{f.listing}", headers=f.seller, json=body(
            "UpdateListing", distinguishing={"title": "Lighthouse keeper's tales", "priceMinor": 900})),
           "UpdateListing"),
        # Distinguishing: the price, and the title the listing already has (the state reads it: the generator's
        # PATCH would set a new one each run).
        Op("reprice", lambda f: http.patch(f"{LISTINGS}/{f.listing}", headers=f.seller, json=body(
            "UpdateListing", distinguishing={"title": "Lighthouse keeper", "priceMinor": 500})), "UpdateListing"),
        Op("unpublish", lambda f: http.post(f"{LISTINGS}/{f.listing}/unpublish", json=body("UnpublishListing"),
                                            headers=f.seller), "UnpublishListing"),
        # Distinguishing: the display name (the state reads it, and the buyer's copy's; the generator's is new).
        Op("persona-patch", lambda f: http.patch(f"/v1/personas/{f.persona}", headers=f.seller, json=body(
            "UpdatePersona", distinguishing={"displayName": "Renamed"})), "UpdatePersona"),
        Op("persona-delete", lambda f: http.delete(f"/v1/personas/{f.persona}", headers=f.seller), "DeletePersona"),
    ]


def _holdings(http, auth: dict[str, str]) -> tuple[list[str], list[int]]:
    """An organization's personas (display names) and invoices (amounts), sorted."""
    personas = http.get("/v1/personas", headers=auth)
    assert personas.status_code == 200, personas.text
    billed = http.get("/v1/billing/invoices", headers=auth)
    assert billed.status_code == 200, billed.text
    return (sorted(p["displayName"] for p in personas.json()["items"]),
            sorted(i["amountDueMinor"] for i in billed.json()["items"]))


def _state(http, f: Fixture):
    """The listing once settled (status, title, price), and what each organization holds: personas (the seller's
    listed one, renamed or deleted; the buyer's copy, named as the persona was when copied) and invoices."""
    listing = _settled(http, f.seller, f.listing)
    return (listing["status"], listing["title"], listing["priceMinor"], _holdings(http, f.seller),
            _holdings(http, f.buyer))


def _table_beside_the_sellers_writes(http, tenants) -> Table:
    table = Table("a published listing of a persona, and an Enterprise buyer",
                  make=lambda: _fixture(http, tenants, crosswise=False), read=lambda f: _state(http, f),
                  ops=_ops(http))
    purchase, *writes = table.ops
    table.pairs = [(purchase, write) for write in writes]  # (the seller's writes among themselves: their tables)
    return table


def _table_crosswise(http, tenants) -> Table:
    ops = [Op("buyer-buys", _purchase(http, "buyer", "listing"), "PurchaseListing"),
           Op("seller-buys", _purchase(http, "seller", "buyers_listing"), "PurchaseListing")]
    table = Table("two Enterprise organizations, each with a published listing",
                  make=lambda: _fixture(http, tenants, crosswise=True),
                  read=lambda f: (_holdings(http, f.seller), _holdings(http, f.buyer)), ops=ops)
    table.pairs = [(ops[0], ops[1])]
    return table


def _check(stack, table: Table, a: str, b: str) -> None:
    before = reruns(stack)
    assert check_named(table, a, b, PAIR_ROUNDS) == []
    assert reruns(stack) == before, "a call was aborted by PostgreSQL (a deadlock) and ran again"


@pytest.mark.parametrize(("a", "b"), params(_table_beside_the_sellers_writes(None, None)))
def test_a_purchase_beside_a_write_of_its_listing_or_persona_answers_as_one_serial_order(
        stack, http, tenants, a, b):
    _check(stack, _table_beside_the_sellers_writes(http, tenants), a, b)


@pytest.mark.parametrize(("a", "b"), params(_table_crosswise(None, None)))
def test_two_organizations_buying_each_others_listing_at_once_answer_as_one_serial_order(
        stack, http, tenants, a, b):
    _check(stack, _table_crosswise(http, tenants), a, b)
