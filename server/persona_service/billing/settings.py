"""Billing's settings: which payment processor, and Stripe's credentials."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from persona_service.kernel.api import Section


class BillingSettings(Section):
    billing_processor: Literal["local", "stripe"] = Field(
        "local", description="payment processor: `local` (finalizes and pays invoices itself) or `stripe`",
    )
    stripe_secret_key: str = Field("", validate_default=True, description="`stripe`: the secret API key (required)")
    stripe_api_base: str = Field("", description="`stripe`: API base URL; empty: Stripe's")
    stripe_webhook_secret: str = Field(
        "", description="`stripe`: the signing secret of the webhook endpoint `POST /v1/billing/stripe/webhook`",
    )

    @field_validator("stripe_secret_key")
    @classmethod
    def _key(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("billing_processor") == "stripe" and not value.strip():
            raise ValueError("required when PERSONA_BILLING_PROCESSOR=stripe")
        return value.strip()
