"""The model provider's settings (see `factory`)."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_settings import NoDecode

from persona_service.kernel.settings import Section


class ModelPrice(BaseModel):
    """USD per million tokens."""

    input: float = 0.0
    output: float = 0.0


class ProviderSettings(Section):
    provider: Literal["local", "openai"] = Field(
        "local",
        description="chat model provider (persona drafting and replies): `local` (an offline template echo for "
                    "tests and demos: no network, no weights) or `openai` (any OpenAI-compatible HTTP API: OpenAI, "
                    "Ollama, vLLM, llama.cpp's server; docs/real-model.md)",
    )
    openai_base_url: str = Field(
        "", validate_default=True,
        description="the OpenAI-compatible API (`…/v1`); required when `PERSONA_PROVIDER=openai`",
    )
    openai_api_key: str = Field("", description="its API key (local servers need none)")
    openai_model: str = Field("gpt-4o-mini", description="chat model")
    moderation_provider: Literal["local", "openai"] = Field(
        "local",
        description="moderation provider: `local` (a keyword screen, no network) or `openai` (an OpenAI-compatible "
                    "`/moderations`, which Ollama, vLLM and llama.cpp's server do not offer); kept apart from the "
                    "chat provider",
    )
    moderation_base_url: str = Field(
        "", validate_default=True,
        description="its API (`…/v1`) when `PERSONA_MODERATION_PROVIDER=openai`; empty: PERSONA_OPENAI_BASE_URL",
    )
    moderation_api_key: str = Field(
        "", description="its API key; empty: PERSONA_OPENAI_API_KEY, but only where the base URL is that one too",
    )
    openai_moderation_model: str = Field("omni-moderation-latest", description="moderation model")
    embedding_provider: Literal["local", "openai"] = Field(
        "local",
        description="embeddings provider (voice fingerprints, drift): `local` (hashed word vectors, no network) or "
                    "`openai` (an OpenAI-compatible `/embeddings`); kept apart from the chat provider",
    )
    embedding_base_url: str = Field(
        "", validate_default=True,
        description="its API (`…/v1`) when `PERSONA_EMBEDDING_PROVIDER=openai`; empty: PERSONA_OPENAI_BASE_URL",
    )
    embedding_api_key: str = Field(
        "", description="its API key; empty: PERSONA_OPENAI_API_KEY, but only where the base URL is that one too",
    )
    openai_embedding_model: str = Field("text-embedding-3-small", description="embedding model")
    image_provider: Literal["local", "openai"] = Field(
        "local",
        description="portrait images: `local` (deterministic PNGs drawn with Pillow) or `openai` (an "
                    "OpenAI-compatible Images API: generations and edits)",
    )
    image_base_url: str = Field(
        "", validate_default=True, description="the Images API (`…/v1`) when `PERSONA_IMAGE_PROVIDER=openai`; empty: PERSONA_OPENAI_BASE_URL",
    )
    image_api_key: str = Field("", description="its API key; empty: PERSONA_OPENAI_API_KEY")
    image_model: str = Field("gpt-image-1", description="image model")
    image_size: str = Field("1024x1024", description="image size asked for")
    image_timeout_seconds: float = Field(
        120.0, gt=0, allow_inf_nan=False, description="upstream timeout of one image call (then it is retried, "
                                                      "and the portrait `failed` with 504 `provider_timeout`)",
    )
    provider_timeout_seconds: float = Field(
        30.0, gt=0, allow_inf_nan=False, description="upstream timeout (then 504 `provider_timeout`)",
    )
    provider_backoff_seconds: float = Field(
        1.0, ge=0, allow_inf_nan=False, description="retry backoff base: retries after 1×, 2×, 4× this",
    )
    provider_retry_budget_seconds: float = Field(
        20.0, ge=0, allow_inf_nan=False,
        description="how long one model call may go on retrying, from its first attempt: a retry whose wait (the "
                    "backoff, or an upstream's `Retry-After` on a 429 or 503, whichever is longer) would end past "
                    "it is not made, and the caller gets the last failure (with the upstream's `Retry-After`: "
                    "docs/real-model.md)",
    )
    provider_attempt_keyed: bool = Field(
        False,
        description="test stacks only: replies to a message holding `[[attempt-keyed]]` differ per attempt of "
                    "their durable run, as a sampling model's do (`providers.attempt_keyed`); never in production",
    )

    @field_validator("provider", "moderation_provider", "embedding_provider", "image_provider", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("openai_base_url")
    @classmethod
    def _url(cls, value: str, info: ValidationInfo) -> str:
        return _base_url(value.strip(), info.data.get("provider") == "openai", "PERSONA_PROVIDER=openai")

    @field_validator("moderation_base_url", "embedding_base_url")
    @classmethod
    def _part_url(cls, value: str, info: ValidationInfo) -> str:
        """Checked where it is used: its own URL, or PERSONA_OPENAI_BASE_URL in its place."""
        part = "moderation" if info.field_name == "moderation_base_url" else "embedding"
        value = value.strip()
        fallback = info.data.get("openai_base_url")
        needed = info.data.get(f"{part}_provider") == "openai" and (bool(value) or not fallback)
        return _base_url(value, needed, f"PERSONA_{part.upper()}_PROVIDER=openai (or set PERSONA_OPENAI_BASE_URL)")

    def upstream(self, part: str) -> tuple[str, str] | None:
        """The (base URL, API key) of `part` ("chat", "moderation" or "embedding"), None where it is local.
        A part without a base URL of its own uses the chat provider's, and its key; a part with one is never
        sent the chat provider's key (it may be another party's server)."""
        if part == "chat":
            return (self.openai_base_url, self.openai_api_key) if self.provider == "openai" else None
        if getattr(self, f"{part}_provider") != "openai":
            return None
        url, key = getattr(self, f"{part}_base_url"), getattr(self, f"{part}_api_key")
        return (url, key) if url else (self.openai_base_url, key or self.openai_api_key)

    @field_validator("image_base_url")
    @classmethod
    def _image_url(cls, value: str, info: ValidationInfo) -> str:
        return _base_url(value.strip() or info.data.get("openai_base_url", ""),
                         info.data.get("image_provider") == "openai",
                         "PERSONA_IMAGE_PROVIDER=openai (or set PERSONA_OPENAI_BASE_URL)")

    model_prices: Annotated[dict[str, ModelPrice], NoDecode] = Field(
        default_factory=dict,
        description='JSON `{model: {input, output}}` in USD per million tokens, for `costUsdMicros`, over the '
                    'built-in prices (`local-persona-1`: 0.5 and 1.5; OpenAI\'s list prices for gpt-4o, '
                    'gpt-4o-mini, gpt-4.1, gpt-4.1-mini, gpt-4.1-nano, o3, o3-mini, o4-mini and '
                    'text-embedding-3-small/-large); `"*"` prices any other model, else its cost is reported as '
                    'unknown (`unpriced`), not $0',
    )

    @field_validator("model_prices", mode="before")
    @classmethod
    def _prices_json(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"expected JSON ({exc})") from None


def _base_url(value: str, needed: bool, when: str) -> str:
    """An OpenAI-compatible base URL: checked only where it is used."""
    if not needed:
        return value
    if not value:
        raise ValueError(f"required when {when}")
    if not value.startswith(("http://", "https://")):
        raise ValueError("expected an http(s) URL")
    return value
