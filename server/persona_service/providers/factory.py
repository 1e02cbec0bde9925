"""Choose and configure the provider from its settings (`ProviderSettings`).

Three parts, each ``local`` (deterministic, no network) or ``openai`` (any
OpenAI-compatible HTTP API): chat generation (``PERSONA_PROVIDER``, with
``PERSONA_OPENAI_BASE_URL``, ``PERSONA_OPENAI_API_KEY``,
``PERSONA_OPENAI_MODEL``), moderation (``PERSONA_MODERATION_PROVIDER``,
``PERSONA_MODERATION_BASE_URL``, ``PERSONA_MODERATION_API_KEY``,
``PERSONA_OPENAI_MODERATION_MODEL``) and embeddings
(``PERSONA_EMBEDDING_PROVIDER``, ``PERSONA_EMBEDDING_BASE_URL``,
``PERSONA_EMBEDDING_API_KEY``, ``PERSONA_OPENAI_EMBEDDING_MODEL``).
Moderation and embeddings stay local unless configured, so pointing only
the chat provider at Ollama, vLLM or llama.cpp's server (chat completions
only) works. Parts on the same upstream share one provider (one keep-alive
client); where all three are one, it is returned as is, else `Composed`.

Either is wrapped in `Retrying` with delays b, 2b, 4b where b is
``PERSONA_PROVIDER_BACKOFF_SECONDS`` (default 1 → 1 s, 2 s, 4 s).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from persona_service.kernel.models import ImageProvider, Model, ProviderError
from persona_service.kernel.settings import load
from persona_service.providers.composed import Composed
from persona_service.providers.local import LocalProvider
from persona_service.providers.preflight import shown as _shown
from persona_service.providers.retrying import Retrying
from persona_service.providers.settings import ProviderSettings


def fingerprint(settings: ProviderSettings | None = None) -> str:
    """The provider configuration's digest: the processes that share it do the same model work, so only they
    answer each other's model calls and run each other's runs (providers.remote, kernel.transport.runs). Stacks
    on one PostgreSQL and Redis but configured for other models never serve each other. A short digest: the
    settings (their keys included) never leave the process."""
    return hashlib.sha256((settings or load(ProviderSettings)).model_dump_json().encode()).hexdigest()[:16]


def backoff_delays(settings: ProviderSettings | None = None) -> tuple[float, float, float]:
    base = (settings or load(ProviderSettings)).provider_backoff_seconds
    return (base, base * 2, base * 4)


def model_turns(turns: int | None, threads: int, settings: ProviderSettings | None = None) -> int:
    """Model steps a runner computes at once (kernel.transport.fair.FairGate): as set, else 1 for the local chat
    model, whose steps are CPU work the turn shares fairly between organizations, and `threads` (all that may
    ask) for an HTTP one, whose call waits on the network: a turn held across that wait made one runner answer
    at most one unary model call per model latency (docs/capacity.md)."""
    if turns is not None:
        return turns
    return 1 if (settings or load(ProviderSettings)).upstream("chat") is None else threads


def in_process_calls(settings: ProviderSettings | None = None) -> frozenset[str]:
    """The model calls a server process answers itself (providers.remote.RemoteProvider's `here`, short texts
    only): a unary completion, moderation and embeddings where they are the local offline model's, pure CPU work
    of a millisecond or less that cost several times as much through Redis and a runner (issue 50: a chat reply's
    completion, ~0.1 ms of the model's, cost the runner ~1 ms and Redis and the server their round trip). They take
    the calling organization's turn of the server's gate (`ModelCall.turn`), as a runner's would. A real model's
    calls, longer texts, streams (a durable run's, which a unary thread never holds) and portraits go to the
    runners; a unary persona creation's soul, voice and audit are short completions, answered here too."""
    settings = settings or load(ProviderSettings)
    return frozenset(op for op, part in (("generate", "chat"), ("moderate", "moderation"), ("embed", "embedding"))
                     if settings.upstream(part) is None)


def make_base_provider(settings: ProviderSettings | None = None) -> Model:
    """The configured provider without the retry wrapper."""
    settings = settings or load(ProviderSettings)
    if settings.provider_attempt_keyed:
        from persona_service.providers.attempt_keyed import AttemptKeyed

        return AttemptKeyed(_chat_provider(settings))
    return _chat_provider(settings)


def _chat_provider(settings: ProviderSettings) -> Model:
    """Chat, moderation and embeddings as configured: one provider per distinct upstream."""
    made: dict[tuple[str, str] | None, Model] = {}

    def part(name: str) -> Model:
        upstream = settings.upstream(name)
        if upstream not in made:
            made[upstream] = LocalProvider() if upstream is None else _openai(settings, *upstream)
        return made[upstream]

    chat, moderation, embeddings = part("chat"), part("moderation"), part("embedding")
    if chat is moderation is embeddings:
        return chat
    return Composed(chat, moderation, embeddings)


def _openai(settings: ProviderSettings, base_url: str, api_key: str) -> Model:
    from persona_service.providers.openai_http import OpenAIHTTPProvider

    return OpenAIHTTPProvider(
        base_url=base_url,
        api_key=api_key,
        model=settings.openai_model,
        embedding_model=settings.openai_embedding_model,
        moderation_model=settings.openai_moderation_model,
        timeout_seconds=settings.provider_timeout_seconds,
    )


def describe(settings: ProviderSettings | None = None) -> str:
    """One line for the startup banner: which model answers, and whether it is a real one; each other part's
    model where it is remote ("remote": on the chat model's server, else its own server is named)."""
    settings = settings or load(ProviderSettings)
    upstream = settings.upstream("chat")
    chat_url = upstream[0] if upstream is not None else None
    parts = []
    for name, url, model in (
            ("moderation", (settings.upstream("moderation") or (None,))[0], settings.openai_moderation_model),
            ("embeddings", (settings.upstream("embedding") or (None,))[0], settings.openai_embedding_model),
            ("images", settings.image_base_url if settings.image_provider == "openai" else None, settings.image_model)):
        if url is None:
            parts.append(f"{name} local")
        else:
            parts.append(f"{name} {model} " + ("remote" if url == chat_url else f"at {_shown(url)}"))
    if upstream is None:
        remote = [p for p in parts if not p.endswith(" local")]
        return ("local test model: an offline template echo, not a real model (plug one in: docs/real-model.md)"
                + (f"; {', '.join(remote)}" if remote else ""))
    if parts[-1] == "images local":
        parts.pop()  # (the portraits' local images are drawn, not a model's: named only when remote)
    return f"{settings.openai_model} at {_shown(upstream[0])} ({', '.join(parts)})"


def make_image_provider(settings: ProviderSettings | None = None) -> ImageProvider:
    """The configured portrait image provider, without the retry wrapper."""
    settings = settings or load(ProviderSettings)
    if settings.image_provider == "openai":
        from persona_service.providers.openai_http import OpenAIHTTPProvider

        return OpenAIHTTPProvider(
            base_url=settings.image_base_url,
            api_key=settings.image_api_key or settings.openai_api_key,
            timeout_seconds=settings.provider_timeout_seconds,
            image_model=settings.image_model,
            image_size=settings.image_size,
            image_timeout_seconds=settings.image_timeout_seconds,
        )
    return LocalProvider()


def make_provider(
    settings: ProviderSettings | None = None,
    *,
    on_failure: Callable[[ProviderError, int, str], None] | None = None,
) -> Retrying:
    """The configured provider, wrapped in `Retrying` with the configured backoff."""
    settings = settings or load(ProviderSettings)
    return Retrying(make_base_provider(settings), delays=backoff_delays(settings), on_failure=on_failure)
