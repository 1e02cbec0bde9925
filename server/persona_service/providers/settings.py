"""The model provider's settings (see `factory`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from persona_service.kernel.settings import Section


class ProviderSettings(Section):
    provider: Literal["local", "openai"] = Field(
        "local",
        description="model provider: `local` (deterministic, no network, no weights) "
                    "or `openai` (any OpenAI-compatible HTTP API)",
    )
    openai_base_url: str = Field(
        "", validate_default=True,
        description="the OpenAI-compatible API (`…/v1`); required when `PERSONA_PROVIDER=openai`",
    )
    openai_api_key: str = Field("", description="its API key")
    openai_model: str = Field("gpt-4o-mini", description="chat model")
    openai_embedding_model: str = Field("text-embedding-3-small", description="embedding model")
    openai_moderation_model: str = Field("omni-moderation-latest", description="moderation model")
    provider_timeout_seconds: float = Field(
        30.0, gt=0, allow_inf_nan=False, description="upstream timeout (then 504 `provider_timeout`)",
    )
    provider_backoff_seconds: float = Field(
        1.0, ge=0, allow_inf_nan=False, description="retry backoff base: retries after 1×, 2×, 4× this",
    )

    @field_validator("provider", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("openai_base_url")
    @classmethod
    def _url(cls, value: str, info: ValidationInfo) -> str:
        value = value.strip()
        if info.data.get("provider") != "openai":
            return value
        if not value:
            raise ValueError("required when PERSONA_PROVIDER=openai")
        if not value.startswith(("http://", "https://")):
            raise ValueError("expected an http(s) URL")
        return value
