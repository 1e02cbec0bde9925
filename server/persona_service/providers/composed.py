"""One provider made of three: chat generation, moderation and embeddings,
each its own (`factory` builds them from `ProviderSettings`).

A plain OpenAI-compatible server (Ollama, vLLM, llama.cpp's server) offers
chat completions only; its chat model beside the local moderation and
embeddings is this class's everyday use. Anything beyond the interface
(`model`, pipeline helpers) is the chat provider's.
"""

from __future__ import annotations

from collections.abc import Iterator

from persona_service.kernel.models import (
    NO_CALL,
    Completion,
    Delta,
    GenerationOptions,
    Message,
    Model,
    ModelCall,
    ModerationResult,
    embedding_identity,
)


class Composed:
    def __init__(self, chat: Model, moderation: Model, embeddings: Model) -> None:
        self.chat = chat
        self.moderation = moderation
        self.embeddings = embeddings
        self.name = chat.name

    def __getattr__(self, name: str) -> object:
        if name in ("chat", "moderation", "embeddings") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.chat, name)

    @property
    def embedding_model(self) -> str:
        """What a voice fingerprint is recorded as made by (personas.generation)."""
        return getattr(self.embeddings, "embedding_model", "") or f"{self.embeddings.name}-embedding"

    @property
    def embedding_identity(self) -> str | None:
        """Its embeddings part's (the chat part's would be answered through `__getattr__` otherwise)."""
        return embedding_identity(self.embeddings)

    def generate(self, messages: list[Message], options: GenerationOptions, *,
                 call: ModelCall = NO_CALL) -> Completion:
        return self.chat.generate(messages, options, call=call)

    def stream(self, messages: list[Message], options: GenerationOptions, *,
               call: ModelCall = NO_CALL) -> Iterator[Delta]:
        return self.chat.stream(messages, options, call=call)

    def moderate(self, text: str, *, call: ModelCall = NO_CALL) -> ModerationResult:
        return self.moderation.moderate(text, call=call)

    def embed(self, texts: list[str], *, call: ModelCall = NO_CALL) -> list[list[float]]:
        return self.embeddings.embed(texts, call=call)

    def close(self) -> None:
        for part in {id(p): p for p in (self.chat, self.moderation, self.embeddings)}.values():
            close = getattr(part, "close", None)
            if close is not None:
                close()
