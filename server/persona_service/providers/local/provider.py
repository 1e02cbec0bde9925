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
from collections.abc import Iterator, Mapping
from typing import TypeVar

from persona_service.kernel.models import (
    NO_CALL,
    Completion,
    Delta,
    GenerationOptions,
    ImagePrompt,
    Message,
    ModelCall,
    ModerationResult,
    ToolCall,
)
from persona_service.providers.local import moderation
from persona_service.providers.local import soul as soul_step
from persona_service.providers.local import voice as voice_step
from persona_service.providers.local.embeddings import EMBEDDING_DIMS, embed_text
from persona_service.providers.local.generation import complete

DEFAULT_MODEL = "local-persona-1"
T = TypeVar("T")


class LocalProvider:
    """Deterministic provider; see the package docstring for its behaviour."""

    name = "local"

    def __init__(self, model: str = DEFAULT_MODEL, embedding_dims: int = EMBEDDING_DIMS):
        self.model = model
        self.embedding_dims = embedding_dims

    @property
    def embedding_identity(self) -> str:
        """What its vectors depend on beside the text (kernel.models.embedding_identity)."""
        return f"local/{self.embedding_dims}"

    # -- Provider interface ------------------------------------------------

    # Every operation's CPU work takes a turn of the process's fair gate, the one its call
    # holds (`ModelCall.turn`): organizations share the CPU by plan, a step at a time.

    def generate(self, messages: list[Message], options: GenerationOptions, *,
                 call: ModelCall = NO_CALL) -> Completion:
        with call.turn():
            return complete(messages, options, self.model)

    def stream(self, messages: list[Message], options: GenerationOptions, *,
               call: ModelCall = NO_CALL) -> Iterator[Delta]:
        return _in_turns(call, self._deltas(messages, options))

    def _deltas(self, messages: list[Message], options: GenerationOptions) -> Iterator[Delta]:
        completion = complete(messages, options, self.model)
        for chunk in re.findall(r"\S+\s*|\s+", continuation(completion.text, options.continue_from)):
            yield Delta(text=chunk)
        for index, call in enumerate(completion.tool_calls):
            yield Delta(tool_call=ToolCall(call.id, call.name, ""), tool_call_index=index)
            for start in range(0, len(call.arguments), 16):
                yield Delta(tool_call=ToolCall("", "", call.arguments[start:start + 16]), tool_call_index=index)
        yield Delta(finish_reason=completion.finish_reason, usage=completion)

    def moderate(self, text: str, *, call: ModelCall = NO_CALL) -> ModerationResult:
        with call.turn():
            return moderation.moderate(text)

    def embed(self, texts: list[str], *, call: ModelCall = NO_CALL) -> list[list[float]]:
        with call.turn():
            return [embed_text(t, self.embedding_dims) for t in texts]

    # The images module loads Pillow: it loads with the first image, not in every process that imports providers.
    def generate_image(self, prompt: ImagePrompt, *, call: ModelCall = NO_CALL) -> bytes:
        from persona_service.providers.local import images

        with call.turn():
            return images.render_portrait(prompt)

    def edit_image(self, image: bytes, instruction: str, *, call: ModelCall = NO_CALL) -> bytes:
        from persona_service.providers.local import images

        with call.turn():
            return images.edit_portrait(image, instruction)

    # -- Persona pipeline entry points --------------------------------------

    def soul_from_intent(self, intent: str, *, call: ModelCall = NO_CALL) -> soul_step.Soul:
        with call.turn():
            return soul_step.soul_from_intent(intent)

    def refine_soul(self, soul: Mapping[str, object], refinement: str, *,
                    call: ModelCall = NO_CALL) -> soul_step.Soul:
        with call.turn():
            return soul_step.refine_soul(soul, refinement)

    def voice_from_soul(self, soul: soul_step.Soul, *, call: ModelCall = NO_CALL) -> voice_step.Voice:
        with call.turn():
            return voice_step.voice_from_soul(soul)


def _in_turns(call: ModelCall, steps: Iterator[T]) -> Iterator[T]:
    """The items of `steps`, each computed in a turn of `call` (a stream's work up to its next delta)."""
    while True:
        with call.turn():
            item = next(steps, None)
        if item is None:
            return
        yield item


def continuation(text: str, prefix: str) -> str:
    """What follows `prefix` in a reply: the rest of `text` (the same messages give the same reply), or the
    whole of it after a prefix another model wrote."""
    if text.startswith(prefix):
        return text[len(prefix):]
    return (" " if prefix[-1:].strip() else "") + text
