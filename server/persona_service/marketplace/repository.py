from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, or_, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from persona_service.kernel.db.base import table_of
from persona_service.kernel.db.records import record, record_or_none, records
from persona_service.marketplace.records import ListingRecord, PurchaseRecord
from persona_service.marketplace.tables import Listing, Purchase

_LIKE_SPECIAL = re.compile(r"[\\%_]")
_listings = table_of(Listing)
_purchases = table_of(Purchase)


class MarketplaceRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def add(self, **values: Any) -> ListingRecord:
        stmt = insert(_listings).values(**values).returning(_listings)
        return record(ListingRecord, self.conn.execute(stmt).mappings().one())

    def get(self, listing_id: str, for_update: bool = False) -> ListingRecord | None:
        stmt = select(_listings).where(_listings.c.id == listing_id)
        if for_update:
            stmt = stmt.with_for_update()
        return record_or_none(ListingRecord, self.conn.execute(stmt).mappings().first())

    def update(self, listing_id: str, **values: Any) -> ListingRecord:
        stmt = (update(_listings).where(_listings.c.id == listing_id).values(updated_at=func.now(), **values)
                .returning(_listings))
        return record(ListingRecord, self.conn.execute(stmt).mappings().one())

    def page(self, *, org_id: str | None, audience_tag: str, words: list[str], limit: int,
             after: tuple[datetime, str] | None) -> list[ListingRecord]:
        """Published listings of everyone (org_id None) or all of one organization's."""
        stmt = select(_listings)
        if org_id is None:
            stmt = stmt.where(_listings.c.status == "published")
        else:
            stmt = stmt.where(_listings.c.org_id == org_id)
        if audience_tag:
            stmt = stmt.where(_listings.c.audience_tags.contains([audience_tag]))
        for word in words:
            pattern = "%" + _LIKE_SPECIAL.sub(lambda m: "\\" + m.group(0), word) + "%"
            stmt = stmt.where(or_(_listings.c.title.ilike(pattern, escape="\\"),
                                  _listings.c.description.ilike(pattern, escape="\\")))
        if after is not None:
            stmt = stmt.where(tuple_(_listings.c.created_at, _listings.c.id) < tuple_(*after))
        stmt = stmt.order_by(_listings.c.created_at.desc(), _listings.c.id.desc()).limit(limit)
        return records(ListingRecord, self.conn.execute(stmt).mappings())

    def purchase_of(self, listing_id: str, buyer_org_id: str) -> PurchaseRecord | None:
        stmt = select(_purchases).where(_purchases.c.listing_id == listing_id,
                                        _purchases.c.buyer_org_id == buyer_org_id)
        return record_or_none(PurchaseRecord, self.conn.execute(stmt).mappings().first())

    def add_purchase(self, **values: Any) -> PurchaseRecord | None:
        """None when this organization bought the listing already (a concurrent purchase won)."""
        stmt = pg_insert(_purchases).values(**values).on_conflict_do_nothing(
            constraint="uq_purchases_listing_buyer").returning(_purchases)
        return record_or_none(PurchaseRecord, self.conn.execute(stmt).mappings().first())
