"""The `LocalProvider` class: the deterministic local model provider.

This is the DEFAULT provider (``PERSONA_PROVIDER=local``), the one that
`persona-service up` uses out of the box, with no network and no weights;
it is not a test double. This file implements the `Provider` interface by
composing the package's parts: `generation` (whole completions, here also
cut into stream deltas), `moderation` and `embeddings`, plus the persona
pipeline entry points of `soul` and `voice`. The package docstring
describes the behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from persona_service.kernel.transport import fair
from persona_service.providers.base import (
    Completion,
    Delta,
    GenerationOptions,
    ImagePrompt,
    Message,
    ModerationResult,
    ToolCall,
)
from persona_service.providers.local import moderation
from persona_service.providers.local import soul as soul_step
from persona_service.providers.local import voice as voice_step
from persona_service.providers.local.embeddings import EMBEDDING_DIMS, embed_text
from persona_service.providers.local.generation import complete

DEFAULT_MODEL = "local-persona-1"


class LocalProvider:
    """Deterministic provider; see the package docstring for its behaviour."""

    name = "local"

    def __init__(self, model: str = DEFAULT_MODEL, embedding_dims: int = EMBEDDING_DIMS):
        self.model = model
        self.embedding_dims = embedding_dims

    @property
    def embedding_identity(self) -> str:
        """What its vectors depend on beside the text (providers.base.embedding_identity)."""
        return f"local/{self.embedding_dims}"

    # -- Provider interface ------------------------------------------------

    # Every operation's CPU work takes a turn of the process's fair gate
    # (kernel.transport.fair): organizations share the CPU by plan, a step at a time.

    def generate(self, messages: list[Message], options: GenerationOptions) -> Completion:
        with fair.cpu_turn():
            return complete(messages, options, self.model)

    def stream(self, messages: list[Message], options: GenerationOptions) -> Iterator[Delta]:
        return fair.in_turns(self._deltas(messages, options))

    def _deltas(self, messages: list[Message], options: GenerationOptions) -> Iterator[Delta]:
        completion = complete(messages, options, self.model)
        for chunk in re.findall(r"\S+\s*|\s+", continuation(completion.text, options.continue_from)):
            yield Delta(text=chunk)
        for index, call in enumerate(completion.tool_calls):
            yield Delta(tool_call=ToolCall(call.id, call.name, ""), tool_call_index=index)
            for start in range(0, len(call.arguments), 16):
                yield Delta(tool_call=ToolCall("", "", call.arguments[start:start + 16]), tool_call_index=index)
        yield Delta(finish_reason=completion.finish_reason, usage=completion)

    def moderate(self, text: str) -> ModerationResult:
        with fair.cpu_turn():
            return moderation.moderate(text)

    def embed(self, texts: list[str]) -> list[list[float]]:
        with fair.cpu_turn():
            return [embed_text(t, self.embedding_dims) for t in texts]

    # The images module loads Pillow: it loads with the first image, not in every process that imports providers.
    def generate_image(self, prompt: ImagePrompt) -> bytes:
        from persona_service.providers.local import images

        with fair.cpu_turn():
            return images.render_portrait(prompt)

    def edit_image(self, image: bytes, instruction: str) -> bytes:
        from persona_service.providers.local import images

        with fair.cpu_turn():
            return images.edit_portrait(image, instruction)

    # -- Persona pipeline entry points --------------------------------------

    def soul_from_intent(self, intent: str) -> dict[str, Any]:
        with fair.cpu_turn():
            return soul_step.soul_from_intent(intent)

    def refine_soul(self, soul: dict[str, Any], refinement: str) -> dict[str, Any]:
        with fair.cpu_turn():
            return soul_step.refine_soul(soul, refinement)

    def voice_from_soul(self, soul: dict[str, Any]) -> dict[str, Any]:
        with fair.cpu_turn():
            return voice_step.voice_from_soul(soul)


def continuation(text: str, prefix: str) -> str:
    """What follows `prefix` in a reply: the rest of `text` (the same messages give the same reply), or the
    whole of it after a prefix another model wrote."""
    if text.startswith(prefix):
        return text[len(prefix):]
    return (" " if prefix[-1:].strip() else "") + text
