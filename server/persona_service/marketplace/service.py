"""The marketplace: listings, their review, search, purchases. Services
never commit; the review runs as a durable task (kernel.transport.tasks)."""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable

from persona_service.billing.api import BillingService
from persona_service.kernel.api import (
    CursorCodec,
    Forbidden,
    ModerationResult,
    NotFound,
    Outbox,
    Principal,
    StateConflict,
    ValidationFailed,
    Violation,
    Work,
    enqueue,
    keyset_page,
    new_id,
    utcnow,
)
from persona_service.marketplace.records import ListingEdit, ListingOwner, ListingRecord, PurchaseRecord
from persona_service.marketplace.repository import MarketplaceRepository
from persona_service.moderation.api import record_flag
from persona_service.personas.api import PersonaDirectory, PersonaService, persona_to_card

REVIEW_TASK = "marketplace.review"
_WORDS = re.compile(r"\w+")


class MarketplaceService:
    def __init__(self, work: Work, *, cursors: CursorCodec | None = None,
                 moderate: Callable[[str], ModerationResult] | None = None) -> None:
        self.work = work
        self._repo = work.of(MarketplaceRepository)
        self.personas = PersonaDirectory(work)
        self.cursors = cursors
        self.moderate = moderate

    # --- listings ------------------------------------------------------------------------

    def create(self, principal: Principal, persona_id: str, title: str, description: str,
               audience_tags: builtins.list[str], price_minor: int, currency: str) -> ListingRecord:
        # Held FOR SHARE until the listing commits: it cannot be deleted or changed meanwhile.
        if self.personas.active(principal.workspace_id, persona_id, hold=True) is None:
            raise NotFound("persona")
        listing = self._repo.add(
            id=new_id("listing"), org_id=principal.org_id, workspace_id=principal.workspace_id,
            persona_id=persona_id, title=title, description=description, audience_tags=_tags(audience_tags),
            price_minor=price_minor, currency=currency or "usd", status="pending_review",
        )
        enqueue(self.work, REVIEW_TASK, principal.org_id, listing.id)
        return listing

    def update(self, principal: Principal, listing_id: str, edit: ListingEdit) -> ListingRecord:
        self._own(principal, listing_id, for_update=True)
        tags = None if edit.audience_tags is None else _tags(edit.audience_tags)
        listing = self._repo.update(listing_id, status="pending_review", rejection_reason="", title=edit.title,
                                   description=edit.description, audience_tags=tags, price_minor=edit.price_minor)
        enqueue(self.work, REVIEW_TASK, principal.org_id, listing.id)
        return listing

    def unpublish(self, principal: Principal, listing_id: str) -> ListingRecord:
        listing = self._own(principal, listing_id, for_update=True)
        if listing.status == "unpublished":
            return listing
        return self._repo.update(listing_id, status="unpublished")

    def get(self, principal: Principal, listing_id: str) -> ListingRecord:
        return self._visible(principal, self._repo.get(listing_id))

    @staticmethod
    def _visible(principal: Principal, listing: ListingRecord | None) -> ListingRecord:
        if listing is None or (listing.status != "published" and listing.org_id != principal.org_id):
            raise NotFound("listing")
        return listing

    def search(self, principal: Principal, audience_tag: str, q: str, mine: bool, cursor: str,
               limit: int) -> tuple[list[ListingRecord], str]:
        tag, words = audience_tag.strip().lower(), _WORDS.findall(q.lower())[:8]
        scope = f"listings:{principal.org_id if mine else '*'}:{tag}:{' '.join(words)}"
        return keyset_page(
            self.cursors, scope, limit, cursor,
            lambda n, after: self._repo.page(org_id=principal.org_id if mine else None, audience_tag=tag,
                                            words=words, limit=n, after=after),
            "created_at",
        )

    # --- the review task -----------------------------------------------------------------

    def review(self, listing_id: str) -> ListingRecord | None:
        """Moderate the persona's soul and voice and the listing's text; publish or reject."""
        owner = self._repo.owner_of(listing_id)
        # The persona held (FOR SHARE: reviewed as it stays) before the listing is locked: personas come before
        # listings in the lock order (kernel.data.aggregates).
        persona = self.personas.active(owner.workspace_id, owner.persona_id, hold=True) if owner else None
        listing = self._repo.get(listing_id, for_update=True)
        if listing is None or listing.status != "pending_review":
            return None  # changed since (unpublished, or reviewed by an earlier attempt)
        if persona is None:
            return self._repo.update(listing_id, status="rejected", rejection_reason="persona_unavailable")
        voice = self.personas.voice(persona.id)
        text = "\n".join([listing.title, listing.description, *listing.audience_tags, *persona.soul.texts(),
                          *((voice.system_prompt, voice.greeting) if voice is not None else ())])
        result = self.moderate(text) if self.moderate is not None else ModerationResult(False)
        if result.flagged:
            record_flag(self.work, org_id=listing.org_id, workspace_id=listing.workspace_id, stage="output_content",
                        subject_type="marketplace_listing", subject_id=listing.id, text=text, result=result)
            return self._repo.update(listing_id, status="rejected", rejection_reason=",".join(result.categories))
        return self._publish(listing)

    def _publish(self, listing: ListingRecord) -> ListingRecord:
        published = self._repo.update(listing.id, status="published", rejection_reason="", published_at=utcnow())
        Outbox(self.work).emit("marketplace.persona.published", listing.org_id, listing.workspace_id, {
            "listingId": listing.id, "personaId": listing.persona_id, "title": listing.title,
            "audienceTags": listing.audience_tags, "priceMinor": listing.price_minor, "currency": listing.currency,
        })
        return published

    def resolve_review(self, listing_id: str, decision: str) -> None:
        """An administrator's decision on a listing moderation flagged: approve publishes it."""
        listing = self._repo.get(listing_id, for_update=True)
        if listing is None or listing.status != "rejected":
            return
        if decision == "approve":
            self._publish(listing)

    def reject_unreviewed(self, listing_id: str) -> None:
        listing = self._repo.get(listing_id, for_update=True)
        if listing is not None and listing.status == "pending_review":
            self._repo.update(listing_id, status="rejected", rejection_reason="review_failed")

    # --- purchases -----------------------------------------------------------------------

    def purchase(self, principal: Principal, listing_id: str, billing: BillingService,
                 personas: PersonaService, fee_bps: int) -> PurchaseRecord:
        if principal.plan != "enterprise":
            raise Forbidden("Marketplace purchases are available on the Enterprise plan only.",
                            {"requiredPlan": "enterprise"})
        owner = self._lock_accounts(principal, listing_id, billing)
        # Then the listed persona and the listing, held FOR SHARE in the lock order (personas before listings): an
        # unpublish, an update or the persona's deletion waits for the purchase to commit, and a purchase after
        # them sees what they left. (Whether the persona is still active is decided when it is copied, below.)
        if owner is not None:
            self.personas.active(owner.workspace_id, owner.persona_id, hold=True)
        listing = self._visible(principal, self._repo.get(listing_id, share=True))
        if listing.org_id == principal.org_id:
            raise StateConflict("An organization cannot buy its own listing.", "listingId", {"listingId": listing_id})
        if listing.status != "published":
            raise StateConflict("The listing is not published.", "status", {"status": listing.status})
        # A concurrent purchase of the same listing by this organization waits here, then answers its purchase.
        self._repo.hold_purchase(listing_id, principal.org_id)
        bought = self._repo.purchase_of(listing_id, principal.org_id)
        if bought is not None:
            return bought
        card = self._card(listing)
        copy_ = personas.import_card(principal, card)
        invoice = billing.charge(principal.org_id, f"Marketplace: {listing.title}", listing.price_minor)
        fee = (listing.price_minor * fee_bps + 5_000) // 10_000
        purchase = self._repo.add_purchase(
            id=new_id("purchase"), listing_id=listing.id, buyer_org_id=principal.org_id, persona_id=copy_.id,
            invoice_id=invoice.id, amount_minor=listing.price_minor, fee_minor=fee, currency=listing.currency,
        )
        if purchase is None:  # bought at the same moment by another call of this organization: roll this one back
            raise StateConflict("The listing is being bought by another request.", "listingId",
                                {"listingId": listing_id})
        billing.add_to_next_invoice(listing.org_id, f"Marketplace sale: {listing.title} (fee {fee_bps / 100:g}%)",
                                    -(listing.price_minor - fee))
        Outbox(self.work).emit("marketplace.persona.purchased", listing.org_id, listing.workspace_id, {
            "listingId": listing.id, "personaId": listing.persona_id, "purchaseId": purchase.id,
            "amountMinor": listing.price_minor, "feeMinor": fee, "currency": listing.currency,
        })
        return purchase

    # --- helpers -------------------------------------------------------------------------

    def _lock_accounts(self, principal: Principal, listing_id: str,
                       billing: BillingService) -> ListingOwner | None:
        """Lock the subscriptions a purchase charges (the buyer's) and credits (the seller's), in id order as
        `lock_roots` takes two roots of one aggregate, before the persona and its listing: subscriptions are declared
        first (kernel.data.aggregates). Taken as each was used (the buyer's, then the seller's), two organizations
        buying each other's listing at once waited on each other in a cycle (the oracle's crosswise pair)."""
        owner = self._repo.owner_of(listing_id)  # (none: a 404 once the listing is looked for)
        for org_id in sorted({principal.org_id, owner.org_id if owner else principal.org_id}):
            billing.subscription(org_id, for_update=True)
        return owner

    def _own(self, principal: Principal, listing_id: str, for_update: bool = False) -> ListingRecord:
        listing = self._repo.get(listing_id, for_update)
        if listing is None or listing.org_id != principal.org_id:
            raise NotFound("listing")
        return listing

    def _card(self, listing: ListingRecord) -> dict[str, object]:
        """The listed persona as a character card, its metadata naming the listing (the copy's lineage)."""
        persona = self.personas.active(listing.workspace_id, listing.persona_id, hold=True)  # copied as held
        voice = self.personas.voice(listing.persona_id)
        if persona is None or voice is None:
            raise StateConflict("The listed persona is no longer available.", "personaId",
                                {"personaId": listing.persona_id})
        return persona_to_card(persona, voice, [], as_listed=listing.id)


MAX_TAG = 40


def _tags(tags: builtins.list[str]) -> builtins.list[str]:
    long = [Violation(f"audienceTags[{i}]", "max_length", t, {"maxLength": MAX_TAG})
            for i, t in enumerate(tags) if len(t.strip()) > MAX_TAG]
    if long:
        raise ValidationFailed(long)
    return sorted({t.strip().lower() for t in tags if t.strip()})
