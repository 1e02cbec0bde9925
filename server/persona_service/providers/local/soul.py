"""The soul step of the deterministic local provider's persona pipeline.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file
answers the ``soul`` task: it drafts a soul (name, desire, fear, backstory,
traits, values, speaking style) from an intent, or takes one from an earlier
message, and applies ``Refine:`` messages to it visibly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypedDict

from persona_service.kernel.models import Message
from persona_service.providers.local.intent import analyse_intent
from persona_service.providers.local.seed import _Seed
from persona_service.providers.local.text import _a, _dumps, _json_objects, _lcfirst, _sentence_safe
from persona_service.providers.local.vocabulary import (
    BACKSTORY_LESSONS,
    BACKSTORY_OPENINGS,
    DESIRES,
    FEARS,
    FIRST_NAMES,
    PLACES,
    SPEAKING_STYLES,
    SURNAMES,
    TRAITS,
    VALUES,
)


class Soul(TypedDict):
    """A persona's soul as the pipeline's steps write and read it (its JSON)."""

    name: str
    desire: str
    fear: str
    backstory: str
    traits: list[str]
    values: list[str]
    speaking_style: str


def soul_task(messages: list[Message]) -> str:
    base_index, base = -1, None
    for i, m in enumerate(messages):
        for obj in _json_objects(m.content):
            inner = obj.get("soul")
            candidate = inner if isinstance(inner, dict) else obj
            if "name" in candidate and "desire" in candidate:
                base_index, base = i, candidate
    refinements = [
        m.content.strip()[len("refine:"):].strip()
        for i, m in enumerate(messages)
        if i > base_index and m.role == "user" and m.content.strip().lower().startswith("refine:")
    ]
    if base is None:
        intents = [m.content for m in messages if m.role == "user"
                   and not m.content.strip().lower().startswith("refine:")]
        intent = intents[-1] if intents else ""
        soul = soul_from_intent(intent)
    else:
        soul = _normalise_soul(base)
        if not all(soul.values()):  # a partial soul: the intent fills its gaps
            intents = [m.content for i, m in enumerate(messages) if i < base_index and m.role == "user"]
            drafted: Mapping[str, object] = soul_from_intent(intents[-1] if intents else soul["name"])
            soul = _normalise_soul({k: v or drafted[k] for k, v in soul.items()})  # (normal already: unchanged)
    for refinement in refinements:
        soul = refine_soul(soul, refinement)
    return _dumps(soul)


def soul_from_intent(intent: str) -> Soul:
    seed = _Seed("soul", intent.strip())
    facts = analyse_intent(intent)
    role, topic = facts["role"], facts["topic"]
    given = facts["name"].split()
    first = given[0] if given else seed.pick("first", FIRST_NAMES)
    name = facts["name"] if len(given) > 1 else f"{first} {seed.pick('last', SURNAMES)}"
    pool = [t for t in TRAITS if t not in facts["adjectives"]]
    traits = list(dict.fromkeys(facts["adjectives"]))[:2]
    traits += seed.sample("traits", pool, 3 + seed.number("trait-count") % 3 - len(traits))
    values = seed.sample("values", VALUES, 2 + seed.number("value-count") % 2)
    fill = {"role": role, "a_role": _a(role), "topic": topic, "first": first, "name": name,
            "place": seed.pick("place", PLACES), "value0": values[0], "value1": values[1],
            "trait0": traits[0], "trait1": traits[1]}
    backstory = " ".join((seed.pick("opening", BACKSTORY_OPENINGS).format(**fill),
                          seed.pick("lesson", BACKSTORY_LESSONS).format(**fill)))
    return Soul(
        name=name,
        desire=seed.pick("desire", DESIRES).format(**fill),
        fear=seed.pick("fear", FEARS).format(**fill),
        backstory=backstory[0].upper() + backstory[1:],
        traits=traits,
        values=values,
        speaking_style=seed.pick("style", SPEAKING_STYLES),
    )


def refine_soul(given: Mapping[str, object], refinement: str) -> Soul:
    soul = _normalise_soul(given)
    text = _sentence_safe(refinement)
    if not text:
        return soul
    lower = text.lower()
    first = soul["name"].split()[0] if soul["name"] else "The persona"
    traits = list(soul["traits"])
    removed = set(re.findall(r"\b(?:less|not|no longer|never)\s+([a-z]+)", lower))
    added = re.findall(r"\b(?:more|very|extra|be|make (?:it|them|him|her) )\s*([a-z]+)", lower)
    added = [w for w in added if w in TRAITS] + [w for w in re.findall(r"[a-z]+", lower) if w in TRAITS]
    traits = [t for t in traits if t not in removed]
    for word in added:
        if word not in removed and word not in traits:
            traits.append(word)
    seed = _Seed("refine", soul["name"], text)
    while len(traits) < 3:
        traits.append(next(t for t in seed.sample("fill", TRAITS, len(TRAITS)) if t not in traits
                           and t not in removed))
    while len(traits) > 5:  # drop the last trait the refinement did not ask for
        keep = [i for i, t in enumerate(traits) if t not in added]
        traits.pop(keep[-1] if keep else 0)
    soul["traits"] = traits
    sentences = re.split(r"(?<=[.!?])\s+", soul["backstory"].strip())
    change = _lcfirst(text)
    if sentences and sentences[-1].startswith("Recently, "):
        sentences[-1] = sentences[-1].rstrip(".") + f"; {change}."
    else:
        sentences = sentences[:2] + [f"Recently, {first} has changed: {change}."]
    soul["backstory"] = " ".join(sentences)
    if re.search(r"\b(speak|speaks|talk|talks|tone|style|voice|sound|sounds|formal|casual|accent|words?)\b", lower):
        soul["speaking_style"] = soul["speaking_style"].rstrip(". ") + f". Refined: {change}."
    return soul


def _normalise_soul(soul: Mapping[str, object]) -> Soul:
    def strings(value: object) -> list[str]:
        return [str(v) for v in value] if isinstance(value, list) else []

    return Soul(
        name=str(soul.get("name") or ""),
        desire=str(soul.get("desire") or ""),
        fear=str(soul.get("fear") or ""),
        backstory=str(soul.get("backstory") or ""),
        traits=strings(soul.get("traits")),
        values=strings(soul.get("values")),
        speaking_style=str(soul.get("speaking_style") or ""),
    )
