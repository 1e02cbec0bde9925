"""The webhooks module's settings (`PERSONA_WEBHOOK_*`)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from persona_service.kernel.api import Section, load


class WebhookSettings(Section):
    model_config = SettingsConfigDict(env_prefix="PERSONA_WEBHOOK_")

    allow_private: bool | None = Field(
        None, validation_alias="PERSONA_WEBHOOKS_ALLOW_PRIVATE",
        description="allow `http` and private/loopback targets (local development and tests only); unset: "
                    "true when PERSONA_ENV=development",
    )
    # At most 2^31-1 s (~68 years): the rotation response reports both as int32 JSON numbers.
    secret_max_age_seconds: int = Field(
        90 * 86400, ge=0, le=2**31 - 1, description="signing secrets older than this (default 90 days) are rotated by the admin rotation RPC",
    )
    secret_rotation_grace_seconds: int = Field(
        604800, ge=0, le=2**31 - 1, description="how long the previous secret stays valid (and signed with) after a rotation",
    )
    lanes: int = Field(4, ge=1, description="concurrent claimed delivery batches per webhook worker")

    @property
    def private_allowed(self) -> bool:
        # Development mode lets a laptop's own receiver (http://localhost:…) take deliveries.
        return self.allow_private if self.allow_private is not None else load().env == "development"
