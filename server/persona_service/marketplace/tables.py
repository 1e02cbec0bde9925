"""Tables of this module (the schema is owned by the Alembic migrations)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, DateTime, ForeignKey, Index, String, Text, UniqueConstraint, func, text
from sqlalchemy.dialects.postgresql import ARRAY  # `@>` (contains), which the GIN index serves
from sqlalchemy.orm import Mapped, mapped_column

from persona_service.kernel.api import Base, created_at_column, trigram_index


class Listing(Base):
    __tablename__ = "marketplace_listings"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    workspace_id: Mapped[str] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False)
    persona_id: Mapped[str] = mapped_column(String(40), nullable=False)
    title: Mapped[str] = mapped_column(String(200), nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    audience_tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    price_minor: Mapped[int] = mapped_column(BigInteger, nullable=False)
    currency: Mapped[str] = mapped_column(String(3), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="pending_review")
    rejection_reason: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_listings_published", "created_at", "id", postgresql_where=text("status = 'published'")),
        Index("ix_listings_tags", "audience_tags", postgresql_using="gin"),
        Index("ix_listings_org_created", "org_id", "created_at", "id"),
        # `q`: each word `ILIKE '%word%'` on the title or the description (migration 0028).
        trigram_index("ix_listings_title_trgm", "title"),
        trigram_index("ix_listings_description_trgm", "description"),
    )


class ListingTag(Base):
    """A listing's audience tags one row each, in the listing's date order
    (#32): the GIN index on `audience_tags` finds a tag's listings but not
    newest first, so a page sorted every match. Kept by the trigger
    `marketplace_listing_tags` (migration 0019) in the transaction of every
    insert, and of every update of a listing's tags or status; a listing's
    delete cascades."""

    __tablename__ = "listing_tags"
    listing_id: Mapped[str] = mapped_column(ForeignKey("marketplace_listings.id", ondelete="CASCADE"),
                                            primary_key=True)
    tag: Mapped[str] = mapped_column(Text, primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    published: Mapped[bool] = mapped_column(Boolean, nullable=False)

    __table_args__ = (
        # Everyone's search: a tag's published listings, newest first.
        Index("ix_listing_tags_published", "tag", "created_at", "listing_id", postgresql_where=text("published")),
        # `mine`: one organization's listings with a tag, whatever their status.
        Index("ix_listing_tags_org", "org_id", "tag", "created_at", "listing_id"),
    )


class Purchase(Base):
    __tablename__ = "marketplace_purchases"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    listing_id: Mapped[str] = mapped_column(ForeignKey("marketplace_listings.id", ondelete="CASCADE"), nullable=False)
    buyer_org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False)
    persona_id: Mapped[str] = mapped_column(String(40), nullable=False)
    invoice_id: Mapped[str] = mapped_column(String(40), nullable=False)
    amount_minor: Mapped[int] = mapped_column(BigInteger, nullable=False)
    fee_minor: Mapped[int] = mapped_column(BigInteger, nullable=False)
    currency: Mapped[str] = mapped_column(String(3), nullable=False)
    created_at: Mapped[datetime] = created_at_column()

    # Once per buying organization.
    __table_args__ = (UniqueConstraint("listing_id", "buyer_org_id", name="uq_purchases_listing_buyer"),)
