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
    delivery_retention_days: int = Field(
        30, ge=0,
        description="how long a webhook delivery and its attempts are kept (GET /v1/webhooks/{id}/deliveries, and "
                    "a replay, which needs the delivery): a month's partition is dropped once its whole month is "
                    "older than this, so deliveries live this long at least and a month more at most (a "
                    "delivery's month is its event's; its attempts', theirs). The specification states no "
                    "retention for deliveries; 30 days is long past the 5 retries' 2 h 38 min, time for a "
                    "receiver to notice a dead-lettered delivery and replay it (its event is kept longer, "
                    "PERSONA_EVENT_RETENTION_DAYS); a delivery still pending that long (its endpoint disabled) "
                    "goes too, and an event fanned out later than this gets no delivery. 0: kept forever",
    )

    @property
    def private_allowed(self) -> bool:
        # Development mode lets a laptop's own receiver (http://localhost:…) take deliveries.
        return self.allow_private if self.allow_private is not None else load().env == "development"
