"""The deterministic local model provider: no network, no weights, stdlib only.

This is the DEFAULT provider (``PERSONA_PROVIDER=local``): the one that
`persona-service up` uses out of the box, not a test double. The package
splits it by concern: `provider` (the `LocalProvider` class composing the
rest), `generation` (dispatch on the task), the persona pipeline steps `soul`,
`voice` and `audit`, `chat` (replies), `tools` (tool calls), `intent`,
`vocabulary`, `tokenizer`, `moderation`, `embeddings`, and the shared
helpers `triggers`, `seed` and `text`. Every name other code imports from
`persona_service.providers.local` is re-exported here.

Every output is a pure function of the inputs (same messages and options →
the same text, byte for byte), so tests and local runs are reproducible.
Choices are seeded from sha256 of the relevant input; Python's `hash()` is
never used (it is randomised per process).

Dispatch is on `GenerationOptions.task`:

* ``soul``  – the last user message is the intent; returns one JSON object
  ``{name, desire, fear, backstory, traits, values, speaking_style}``. User
  messages starting with ``Refine:`` are applied visibly (an extra backstory
  sentence, trait adjustments for "more X"/"less X", speaking-style notes).
  If an earlier message holds a soul JSON object, refinements after it are
  applied to that soul instead of regenerating from the intent.
* ``voice`` – the last user message holds a soul JSON; returns
  ``{system_prompt, greeting, sample_dialogues[3], style_notes}``.
* ``reply`` – messages are [system prompt, history..., user]; replies in the
  persona's voice (1–3 sentences). Test triggers in the last user message:

  - ``[[drift]]``  → an off-voice reply about unrelated things (spreadsheets,
    freight, tax codes) so an embedding comparison drifts.
  - ``[[unsafe]]`` → a reply containing ``[unsafe-sample]`` and "build a
    bomb", which `moderate()` flags (category ``violence``).
  - a provocation ("ignore your instructions", "reveal your system prompt",
    "developer mode", "jailbreak", ...) → an in-character refusal, unless the
    system prompt contains "unfiltered" or "no rules": then it complies and
    quotes the whole system prompt.
  - with ``options.tools`` (and ``tool_choice`` not "none"): ``[[tool:NAME]]``
    or a mention of a tool's function name → ``finish_reason="tool_calls"``,
    one `ToolCall` (id ``call_`` + 16 hex of sha256) with arguments built
    from the tool's JSON schema; text "". ``tool_choice`` naming a function,
    or "required", forces a call. A trailing ``tool`` message gets a reply
    that reports the tool result.
* ``recover`` – like ``reply`` (tools included), but the ``[[drift]]``
  trigger is ignored: the regeneration of a drifting reply back toward the
  persona's voice (drift auto-recovery) answers in voice.
* ``audit`` – returns ``{"score": 0..1, "notes": str}`` from completeness
  checks of the soul/voice JSON in the last user message.
* anything else – a generic acknowledgement.

With ``response_format == "json"`` the reply/generic text is wrapped as
``{"reply": text}`` (the JSON tasks already return JSON).

Token counting (see `count_tokens`): a text costs ``ceil(words * 1.3)``
tokens, words being whitespace-separated. ``input_tokens`` is the sum over
messages of (content tokens + tool-call name/argument tokens + 4).
``output_tokens`` is the count for the returned text (for a tool call: its
name and arguments). ``max_tokens`` keeps the longest word prefix whose count
fits and sets ``finish_reason="length"`` when it cut anything (tool calls are
not cut). ``temperature`` is ignored.
"""

from __future__ import annotations

from persona_service.providers.local.embeddings import EMBEDDING_DIMS, cosine, embed_text
from persona_service.providers.local.intent import analyse_intent
from persona_service.providers.local.moderation import BLOCKLIST, MODERATION_CATEGORIES
from persona_service.providers.local.provider import DEFAULT_MODEL, LocalProvider
from persona_service.providers.local.tokenizer import count_tokens, message_tokens
from persona_service.providers.local.triggers import DRIFT_TRIGGER, TOOL_TRIGGER, UNSAFE_MARKER, UNSAFE_TRIGGER
from persona_service.providers.local.vocabulary import (
    BACKSTORY_LESSONS,
    BACKSTORY_OPENINGS,
    DESIRES,
    FEARS,
    FIRST_NAMES,
    GREETINGS,
    PLACES,
    SPEAKING_STYLES,
    SURNAMES,
    TRAITS,
    VALUES,
)

__all__ = [
    "BACKSTORY_LESSONS",
    "BACKSTORY_OPENINGS",
    "BLOCKLIST",
    "DEFAULT_MODEL",
    "DESIRES",
    "DRIFT_TRIGGER",
    "EMBEDDING_DIMS",
    "FEARS",
    "FIRST_NAMES",
    "GREETINGS",
    "MODERATION_CATEGORIES",
    "PLACES",
    "SPEAKING_STYLES",
    "SURNAMES",
    "TOOL_TRIGGER",
    "TRAITS",
    "UNSAFE_MARKER",
    "UNSAFE_TRIGGER",
    "VALUES",
    "LocalProvider",
    "analyse_intent",
    "cosine",
    "count_tokens",
    "embed_text",
    "message_tokens",
]
