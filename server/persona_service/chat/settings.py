"""The chat module's settings (`PERSONA_CHAT_*`)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from persona_service.kernel.api import Section


class ChatSettings(Section):
    model_config = SettingsConfigDict(env_prefix="PERSONA_CHAT_")

    retention_days: int = Field(
        0, ge=0,
        description="how long a chat session is kept from its start, with its messages (alternatives and edits "
                    "included): messages are partitioned by their session's month, and a month's partition is "
                    "dropped, its sessions deleted with it, once the whole month is older than this, so a "
                    "conversation is never cut, and lives this long at least and a month more at most from its "
                    "start, however recently used (those from before the table was partitioned, one partition, "
                    "go when the newest of them is this old). Usage over time (GET /v1/usage) loses the replies "
                    "of a dropped month too. The specification states no retention for chat. 0 (the default): "
                    "kept forever",
    )
