"""Choose and configure the provider from the environment.

``PERSONA_PROVIDER``: ``local`` (default; deterministic, no network) or
``openai`` (any OpenAI-compatible HTTP API), configured by
``PERSONA_OPENAI_BASE_URL`` (required), ``PERSONA_OPENAI_API_KEY``,
``PERSONA_OPENAI_MODEL`` (gpt-4o-mini), ``PERSONA_OPENAI_EMBEDDING_MODEL``
(text-embedding-3-small), ``PERSONA_OPENAI_MODERATION_MODEL``
(omni-moderation-latest) and ``PERSONA_PROVIDER_TIMEOUT_SECONDS`` (30).

Either is wrapped in `Retrying` with delays b, 2b, 4b where b is
``PERSONA_PROVIDER_BACKOFF_SECONDS`` (default 1 → 1 s, 2 s, 4 s).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from persona_service.providers.base import Provider, ProviderError
from persona_service.providers.local import LocalProvider
from persona_service.providers.retrying import Retrying

PROVIDERS = ("local", "openai")


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value < 0 or value != value:
        raise ValueError(f"{name} must not be negative, got {raw!r}")
    return value


def backoff_delays(env: Mapping[str, str] = os.environ) -> tuple[float, float, float]:
    base = _float(env, "PERSONA_PROVIDER_BACKOFF_SECONDS", 1.0)
    return (base, base * 2, base * 4)


def make_base_provider(settings_env: Mapping[str, str] = os.environ) -> Provider:
    """The configured provider without the retry wrapper."""
    kind = (settings_env.get("PERSONA_PROVIDER") or "local").strip().lower()
    if kind == "local":
        return LocalProvider()
    if kind == "openai":
        from persona_service.providers.openai_http import OpenAIHTTPProvider

        base_url = (settings_env.get("PERSONA_OPENAI_BASE_URL") or "").strip()
        if not base_url:
            raise ValueError("PERSONA_OPENAI_BASE_URL is required when PERSONA_PROVIDER=openai")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"PERSONA_OPENAI_BASE_URL must be an http(s) URL, got {base_url!r}")
        timeout = _float(settings_env, "PERSONA_PROVIDER_TIMEOUT_SECONDS", 30.0)
        if timeout <= 0:
            raise ValueError("PERSONA_PROVIDER_TIMEOUT_SECONDS must be positive")
        return OpenAIHTTPProvider(
            base_url=base_url,
            api_key=settings_env.get("PERSONA_OPENAI_API_KEY") or "",
            model=settings_env.get("PERSONA_OPENAI_MODEL") or "gpt-4o-mini",
            embedding_model=settings_env.get("PERSONA_OPENAI_EMBEDDING_MODEL") or "text-embedding-3-small",
            moderation_model=settings_env.get("PERSONA_OPENAI_MODERATION_MODEL") or "omni-moderation-latest",
            timeout_seconds=timeout,
        )
    raise ValueError(f"PERSONA_PROVIDER must be one of {', '.join(PROVIDERS)}, got {kind!r}")


def make_provider(
    settings_env: Mapping[str, str] = os.environ,
    *,
    on_failure: Callable[[ProviderError, int, str], None] | None = None,
) -> Retrying:
    """The configured provider, wrapped in `Retrying` with the configured backoff."""
    return Retrying(make_base_provider(settings_env), delays=backoff_delays(settings_env), on_failure=on_failure)
