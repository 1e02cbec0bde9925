"""A test double: the configured provider, except that a streamed reply to a
message holding `[[attempt-keyed]]` differs per attempt of its durable run
(`ModelCall.attempt`, kernel.transport.runs), as a sampling model's replies do. Only with
`PERSONA_PROVIDER_ATTEMPT_KEYED=1`, which test stacks set to check that a
reply taken over mid-way goes on from what its clients saw.

The first attempt streams `HOLD_AFTER` pieces, then waits (its process is
killed meanwhile); a continuation (`continue_from`) goes on with the words
that follow as many as the prefix holds.
"""

from __future__ import annotations

import re
import threading
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
)

TRIGGER = "[[attempt-keyed]]"
HOLD_AFTER = 2  # pieces the first attempt streams before it waits: "Take 1. ", a sentence (released at once)
HOLD_SECONDS = 60.0  # long enough for a test to kill its process; then it goes on


class AttemptKeyed:
    def __init__(self, provider: Model) -> None:
        self.provider = provider
        self.name = provider.name

    def __getattr__(self, name: str) -> object:  # everything else is the provider's own
        if name == "provider" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.provider, name)

    # The rest of the interface, the provider's own (named, so that this is a `Model` to its callers' types).
    def generate(self, messages: list[Message], options: GenerationOptions, *,
                 call: ModelCall = NO_CALL) -> Completion:
        return self.provider.generate(messages, options, call=call)

    def moderate(self, text: str, *, call: ModelCall = NO_CALL) -> ModerationResult:
        return self.provider.moderate(text, call=call)

    def embed(self, texts: list[str], *, call: ModelCall = NO_CALL) -> list[list[float]]:
        return self.provider.embed(texts, call=call)

    def stream(self, messages: list[Message], options: GenerationOptions, *,
               call: ModelCall = NO_CALL) -> Iterator[Delta]:
        user = next((m.content for m in reversed(messages) if m.role == "user"), "")
        if TRIGGER not in user or options.task != "reply":
            return self.provider.stream(messages, options, call=call)
        return self._keyed(messages, options, call)

    def _keyed(self, messages: list[Message], options: GenerationOptions, call: ModelCall) -> Iterator[Delta]:
        plain = GenerationOptions(task=options.task, model=options.model)
        done = self.provider.generate(messages, plain, call=call)
        attempt = call.attempt
        pieces = _pieces(f"Take {attempt}. {done.text}")
        skip = len(_pieces(options.continue_from))
        for n, piece in enumerate(pieces[skip:], start=skip):
            if attempt == 1 and n == HOLD_AFTER:
                threading.Event().wait(HOLD_SECONDS)
            yield Delta(text=piece)
        yield Delta(finish_reason="stop", usage=done)


def _pieces(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text)
