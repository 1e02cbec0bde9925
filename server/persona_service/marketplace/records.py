"""Typed records of the marketplace module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class ListingRecord:
    id: str
    org_id: str
    workspace_id: str
    persona_id: str
    title: str
    description: str
    audience_tags: list[str]
    price_minor: int
    currency: str
    status: str
    rejection_reason: str
    created_at: datetime
    updated_at: datetime
    published_at: datetime | None


@dataclass(frozen=True, slots=True)
class ListingOwner:
    """What never changes of a listing: its organization, workspace and persona (read before it is locked)."""
    org_id: str
    workspace_id: str
    persona_id: str


@dataclass(frozen=True, slots=True)
class ListingEdit:
    """What a seller's update of a listing changes (None: left as it is); the listing goes back to review."""

    title: str | None = None
    description: str | None = None
    audience_tags: list[str] | None = None
    price_minor: int | None = None


@dataclass(frozen=True, slots=True)
class ListingChanges:
    """What a write of a listing sets: always its status (None: left as it is)."""

    status: str
    rejection_reason: str | None = None
    title: str | None = None
    description: str | None = None
    audience_tags: list[str] | None = None
    price_minor: int | None = None
    published_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class PurchaseRecord:
    id: str
    listing_id: str
    buyer_org_id: str
    persona_id: str
    invoice_id: str
    amount_minor: int
    fee_minor: int
    currency: str
    created_at: datetime
