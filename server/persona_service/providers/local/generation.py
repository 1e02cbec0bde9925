"""Text generation of the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file
dispatches on `GenerationOptions.task` to the persona pipeline steps (`soul`,
`voice`, `audit`), the chat replies (`chat`) and tool calls (`tools`), then
applies ``response_format`` and ``max_tokens`` and counts the tokens.
"""

from __future__ import annotations

from persona_service.kernel.models import Completion, GenerationOptions, Message
from persona_service.providers.local.audit import audit_task
from persona_service.providers.local.chat import reply_task
from persona_service.providers.local.soul import soul_task
from persona_service.providers.local.text import _dumps, _last_user, _snippet
from persona_service.providers.local.tokenizer import _truncate, count_tokens, message_tokens
from persona_service.providers.local.tools import tool_call
from persona_service.providers.local.voice import voice_task


def complete(messages: list[Message], options: GenerationOptions, default_model: str) -> Completion:
    """The completion for `messages`; `default_model` names it unless `options.model` does."""
    messages = list(messages)
    model = options.model or default_model
    input_tokens = sum(message_tokens(m) for m in messages)
    call = tool_call(messages, options) if options.task in ("reply", "recover") else None
    if call is not None:
        output = count_tokens(call.name) + count_tokens(call.arguments)
        return Completion("", model, input_tokens, output, "tool_calls", (call,))
    task = options.task
    if task == "soul":
        text = soul_task(messages)
    elif task == "voice":
        text = voice_task(messages)
    elif task == "audit":
        text = audit_task(messages)
    elif task == "reply":
        text = reply_task(messages)
    elif task == "recover":
        text = reply_task(messages, recover=True)
    else:
        text = generic_task(messages)
    if options.response_format == "json" and task not in ("soul", "voice", "audit"):
        text = _dumps({"reply": text})
    text, cut = _truncate(text, options.max_tokens)
    return Completion(text, model, input_tokens, count_tokens(text), "length" if cut else "stop")


def generic_task(messages: list[Message]) -> str:
    snippet = _snippet(_last_user(messages), 16)
    return f"Acknowledged: \"{snippet}\"." if snippet else "Acknowledged."
