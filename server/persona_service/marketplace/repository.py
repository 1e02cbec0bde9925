from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import Connection, func, insert, or_, select, true, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from persona_service.kernel.api import (
    DECIDES_NOTHING,
    changed_columns,
    declare_aggregate,
    lock_root,
    once_per,
    record,
    record_or_none,
    records,
    table_of,
)
from persona_service.marketplace.records import ListingChanges, ListingOwner, ListingRecord, PurchaseRecord
from persona_service.marketplace.tables import Listing, ListingTag, Purchase

_LIKE_SPECIAL = re.compile(r"[\\%_]")
_listings = table_of(Listing)
_purchases = table_of(Purchase)
_tags = table_of(ListingTag)

# A listing with its purchases and its tags (`listing_tags`, kept by a trigger in the listing's own statements):
# every write of a listing (update, unpublish, its review and an administrator's decision) locks its row first
# (kernel.data.aggregates), then decides on its status; a purchase holds it FOR SHARE (it must stay published and
# priced as read until the purchase commits, and purchases by other buyers go on beside it) and then, under the
# (listing, buyer) advisory lock, reads the buyer's purchase it decides on.
LISTING = declare_aggregate("listing", _listings, _purchases, _tags)


class MarketplaceRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    def add(self, *, id: str, org_id: str, workspace_id: str, persona_id: str, title: str, description: str,
            audience_tags: list[str], price_minor: int, currency: str, status: str) -> ListingRecord:
        stmt = insert(_listings).values(
            id=id, org_id=org_id, workspace_id=workspace_id, persona_id=persona_id, title=title,
            description=description, audience_tags=audience_tags, price_minor=price_minor, currency=currency,
            status=status).returning(_listings)
        return record(ListingRecord, self._conn.execute(stmt).mappings().one())

    def get(self, listing_id: str, for_update: bool = False, share: bool = False) -> ListingRecord | None:
        """The listing; `for_update`: locked (`lock_root`: every write of a listing starts there); `share`: held
        FOR SHARE until the transaction ends (a purchase: its writes wait, other purchases go on)."""
        if for_update:
            return lock_root(self._conn, LISTING, ListingRecord, _listings.c.id == listing_id)
        stmt = select(_listings).where(_listings.c.id == listing_id)
        if share:
            stmt = stmt.with_for_update(read=True)
        return record_or_none(ListingRecord, self._conn.execute(stmt).mappings().first())

    def owner_of(self, listing_id: str) -> ListingOwner | None:
        """The listing's organization, workspace and persona, read before the listing is held (a purchase locks
        the subscriptions, then the persona, first): none of them ever changes, so the read decides nothing."""
        stmt = select(_listings.c.org_id, _listings.c.workspace_id, _listings.c.persona_id) \
            .where(_listings.c.id == listing_id)
        return record_or_none(ListingOwner, self._conn.execute(
            stmt.execution_options(**{DECIDES_NOTHING: True})).mappings().first())

    def update(self, listing_id: str, *, status: str, rejection_reason: str | None = None, title: str | None = None,
               description: str | None = None, audience_tags: list[str] | None = None, price_minor: int | None = None,
               published_at: datetime | None = None) -> ListingRecord:
        """A write of the listing, always of its status (the others: None is left as it is)."""
        changes = ListingChanges(status=status, rejection_reason=rejection_reason, title=title, description=description,
                                 audience_tags=audience_tags, price_minor=price_minor, published_at=published_at)
        stmt = (update(_listings).where(_listings.c.id == listing_id)
                .values(updated_at=func.now(), **changed_columns(changes)).returning(_listings))
        return record(ListingRecord, self._conn.execute(stmt).mappings().one())

    def page(self, *, org_id: str | None, audience_tag: str, words: list[str], limit: int,
             after: tuple[datetime, str] | None) -> list[ListingRecord]:
        """Published listings of everyone (org_id None) or all of one
        organization's, newest first. With a tag, through `listing_tags`
        (kept by a trigger, migration 0019), whose indexes give a tag's
        listings in that order: the GIN index on `audience_tags` finds them
        but unordered, so a page sorted every match."""
        if audience_tag:
            key = (_tags.c.created_at, _tags.c.listing_id)
            stmt = (select(_listings).select_from(_tags.join(_listings, _listings.c.id == _tags.c.listing_id))
                    .where(_tags.c.tag == audience_tag))
            if org_id is None:  # the partial index's predicate, as a literal so generic plans use it too
                stmt = stmt.where(_tags.c.published, _listings.c.status == "published")
            else:
                stmt = stmt.where(_tags.c.org_id == org_id)
        else:
            key = (_listings.c.created_at, _listings.c.id)
            stmt = select(_listings)
            if org_id is None:
                stmt = stmt.where(_listings.c.status == "published")
            else:
                stmt = stmt.where(_listings.c.org_id == org_id)
        for word in words:
            pattern = "%" + _LIKE_SPECIAL.sub(lambda m: "\\" + m.group(0), word) + "%"
            stmt = stmt.where(or_(_listings.c.title.ilike(pattern, escape="\\"),
                                  _listings.c.description.ilike(pattern, escape="\\")))
        if after is not None:
            stmt = stmt.where(tuple_(*key) < tuple_(*after))
        stmt = stmt.order_by(key[0].desc(), key[1].desc()).limit(limit)
        return records(ListingRecord, self._conn.execute(stmt).mappings())

    def hold_purchase(self, listing_id: str, buyer_org_id: str) -> None:
        """One purchase of a listing by an organization at a time (until the transaction ends)."""
        once_per(self._conn, "marketplace.purchase", listing_id, buyer_org_id)

    def purchase_of(self, listing_id: str, buyer_org_id: str) -> PurchaseRecord | None:
        stmt = select(_purchases).where(_purchases.c.listing_id == listing_id,
                                        _purchases.c.buyer_org_id == buyer_org_id)
        return record_or_none(PurchaseRecord, self._conn.execute(stmt).mappings().first())

    def add_purchase(self, *, id: str, listing_id: str, buyer_org_id: str, persona_id: str, invoice_id: str,
                     amount_minor: int, fee_minor: int, currency: str) -> PurchaseRecord | None:
        """None when this organization bought the listing already (a concurrent purchase won)."""
        stmt = pg_insert(_purchases).values(
            id=id, listing_id=listing_id, buyer_org_id=buyer_org_id, persona_id=persona_id, invoice_id=invoice_id,
            amount_minor=amount_minor, fee_minor=fee_minor, currency=currency,
        ).on_conflict_do_nothing(
            constraint="uq_purchases_listing_buyer").returning(_purchases)
        return record_or_none(PurchaseRecord, self._conn.execute(stmt).mappings().first())


def rebuild_tags(conn: Connection) -> None:
    """Set `listing_tags` from the listings (after a bulk load that bypassed
    its trigger, e.g. the volume seed's COPY); rows already right stay."""
    tag = func.unnest(_listings.c.audience_tags).table_valued("tag").render_derived(name="t")
    rows = select(_listings.c.id, tag.c.tag, _listings.c.org_id, _listings.c.created_at,
                  _listings.c.status == "published").select_from(_listings.join(tag, true())).distinct()
    stmt = pg_insert(_tags).from_select(["listing_id", "tag", "org_id", "created_at", "published"], rows)
    conn.execute(stmt.on_conflict_do_update(index_elements=[_tags.c.listing_id, _tags.c.tag],
                                            set_={"published": stmt.excluded.published}))
