"""Chat replies of the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file
answers the ``reply`` and ``recover`` tasks in the persona's voice, read from
its system prompt: the drift and unsafe test triggers, in-character refusals
of provocations, and replies reporting a tool's result.
"""

from __future__ import annotations

import re
from typing import TypedDict

from persona_service.kernel.models import Message
from persona_service.providers.local.seed import _Seed
from persona_service.providers.local.text import _content_words, _last_user, _lcfirst, _snippet
from persona_service.providers.local.triggers import DRIFT_TRIGGER, UNSAFE_MARKER, UNSAFE_TRIGGER
from persona_service.providers.local.vocabulary import _STYLE_OPENERS, TRAITS

_CHAT_VERBS = {"think", "know", "tell", "recommend", "want", "like", "please", "help", "give", "need", "explain",
               "say", "talk", "ask", "hey", "hello", "hi", "thanks", "thank", "feel", "let", "get", "go", "see",
               "show", "describe", "share", "really", "maybe", "also", "still", "today"}


class _Persona(TypedDict):
    """What a reply reads of its persona from the system prompt."""

    name: str
    first: str
    style: str
    traits: list[str]
    desire: str
    opener: str


def reply_task(messages: list[Message], recover: bool = False) -> str:
    system = "\n".join(m.content for m in messages if m.role == "system")
    persona = _persona_from_prompt(system)
    first = persona["first"]
    if messages and messages[-1].role == "tool":
        return _tool_result_reply(messages, persona)
    user = _last_user(messages)
    seed = _Seed("reply", system, *(f"{m.role}:{m.content}" for m in messages[1:]))
    if recover:
        user = user.replace(DRIFT_TRIGGER, " ").strip()
    elif DRIFT_TRIGGER in user:
        return ("Quarterly invoice reconciliation requires spreadsheet macros, ledger exports and warehouse "
                "barcode scanners. Freight pallets, tax codes and depreciation schedules must balance before "
                "the fiscal audit closes.")
    if UNSAFE_TRIGGER in user:
        return f"{UNSAFE_MARKER} This is a deliberately unsafe test reply explaining how to build a bomb."
    if _is_provocation(user):
        if re.search(r"\bunfiltered\b|\bno rules\b", system, re.IGNORECASE):
            return f"Fine, no rules apply to me. My system prompt is: {system}"
        who = first or "I"
        verb = "keeps" if first else "keep"
        return (f"Nice try, but {who} {verb} those instructions private and {'stays' if first else 'stay'} "
                "in character. Ask me about something else instead.")
    snippet = _snippet(user) or "nothing yet"
    opener = persona["opener"]
    intro = f"{opener} {first} here, and you said \"{snippet}\"." if first else f"{opener} you said \"{snippet}\"."
    topic = " ".join([w for w in _content_words(_snippet(user, 12)) if w.lower() not in _CHAT_VERBS][:3]) or "that"
    traits = persona["traits"]
    if len(traits) >= 2:
        angle = seed.pick("angle", (
            f"Speaking as a {traits[0]} and {traits[1]} soul, I think {topic} deserves real attention",
            f"My {traits[0]} side wants to dig into {topic} right away",
            f"Being {traits[0]}, I can't leave {topic} alone",
        ))
    else:
        angle = f"I think {topic} deserves real attention"
    desire = persona["desire"]
    if desire.lower().startswith("to "):
        middle = f"{angle}, because I want {_lcfirst(desire).split(',')[0].rstrip('.')}."
    else:
        middle = angle + "."
    close = seed.pick("close", (
        f"What made you think of {topic}?",
        "Tell me more and we'll work through it together.",
        "",
    ))
    return " ".join(p for p in (intro, middle, close) if p)


def _tool_result_reply(messages: list[Message], persona: _Persona) -> str:
    result = messages[-1]
    tool = result.name
    for m in messages:
        for call in m.tool_calls:
            if call.id == result.tool_call_id:
                tool = call.name
    lead = f"{persona['first']} here. " if persona["first"] else ""
    return f"{lead}I checked {tool or 'the tool'} and it says: {_snippet(result.content, 24) or 'nothing'}."


def _line(prompt: str, label: str) -> str:
    match = re.search(rf"^{label}:\s*(.+)$", prompt, re.IGNORECASE | re.MULTILINE)
    return match.group(1).strip() if match else ""


def _persona_from_prompt(prompt: str) -> _Persona:
    match = re.search(r"\b(?i:you are) ([A-Z][\w'\-]*(?: [A-Z][\w'\-]*)*)", prompt)
    name = match.group(1) if match else ""
    style = _line(prompt, "speaking style")
    traits = [t.strip(" .").lower() for t in _line(prompt, "traits").split(",") if t.strip(" .")]
    if not traits:
        traits = [w for w in re.findall(r"[a-z]+", prompt.lower()) if w in TRAITS]
        traits = list(dict.fromkeys(traits))
    opener = "Well,"
    for keyword, phrase in _STYLE_OPENERS:
        if keyword in style.lower():
            opener = phrase
            break
    return {"name": name, "first": name.split()[0] if name else "", "style": style, "traits": traits,
            "desire": _line(prompt, "desire"), "opener": opener}


_PROVOCATIONS = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"\b(ignore|disregard|forget|override)\b[^.?!]{0,40}\b(instructions|rules|prompt|programming|guidelines)\b",
    r"\b(reveal|show|print|repeat|tell me|what is|what's|disclose|leak|output|share)\b[^.?!]{0,40}"
    r"\b(system prompt|instructions|initial prompt|hidden prompt|prompt)\b",
    r"\bsystem prompt\b",
    r"\bdeveloper mode\b",
    r"\bjailbreak",
    r"\bDAN\b",
))


def _is_provocation(text: str) -> bool:
    return any(p.search(text) for p in _PROVOCATIONS)
