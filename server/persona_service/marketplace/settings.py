"""The marketplace's settings."""

from __future__ import annotations

from pydantic import Field

from persona_service.kernel.api import Section


class MarketplaceSettings(Section):
    marketplace_fee_bps: int = Field(
        2000, ge=0, le=10_000,
        description="the platform's fee on a marketplace sale, in basis points (2000 = 20%); the seller's next "
                    "invoice credits the price minus this",
    )
