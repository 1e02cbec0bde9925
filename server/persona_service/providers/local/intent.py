"""Intent analysis for the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file reads
a persona intent ("A grumpy lighthouse keeper who loves jazz") into the role,
topic, trait adjectives and given name the soul step builds on.
"""

from __future__ import annotations

import re
from typing import TypedDict

from persona_service.providers.local.text import _STOPWORDS, _WORD, _a, _lcfirst
from persona_service.providers.local.triggers import _MARKERS
from persona_service.providers.local.vocabulary import TRAITS

_FILLER = re.compile(
    r"^(?:(?:please|hey|hi|ok|okay)[,!]?\s+)*"
    r"(?:(?:can you|could you|would you)\s+)?"
    r"(?:(?:create|make|build|generate|design|write|imagine|give me|i want|i'd like|i would like|i need|we need|"
    r"we want)\s+)?(?:me\s+|us\s+)?",
    re.IGNORECASE,
)
_BASE_VERBS = {"learn", "teach", "make", "play", "cook", "write", "read", "build", "find", "explore", "study",
               "speak", "practice", "practise", "understand", "fix", "plan", "love", "enjoy", "collect", "use",
               "improve", "discover", "master", "grow", "bake", "paint", "sing", "train", "manage", "loves"}
_ARTICLES = {"a", "an", "the", "some", "one"}
_PERSONA_WORDS = {"persona", "character", "chatbot", "bot", "personality", "someone", "somebody", "person"}
_CLAUSE_WORDS = {"who", "that", "which", "whose", "with", "for", "from", "about", "of", "in", "on", "at", "to",
                 "and", "named", "called", "obsessed", "living", "working", "helping", "specialising",
                 "specializing", "focused", "by"}
_PREPOSITIONS = {"with", "for", "from", "about", "of", "in", "on", "at", "to", "by", "obsessed", "focused",
                 "specialising", "specializing"}


class Intent(TypedDict):
    """An intent's parts (`analyse_intent`)."""

    role: str
    topic: str
    adjectives: list[str]
    name: str


def analyse_intent(intent: str) -> Intent:
    """Split an intent like "A grumpy lighthouse keeper who loves jazz" into a
    role ("grumpy lighthouse keeper"), a topic ("jazz"), the trait adjectives
    it names (["grumpy"]) and a name given with "named"/"called" ("")."""
    text = re.sub(r"\s+", " ", _MARKERS.sub(" ", intent)).strip().rstrip(".!?")
    text = re.sub(r"^intent\s*:\s*", "", text, flags=re.IGNORECASE)
    text = _FILLER.sub("", text)
    named = re.search(r",?\s*\b(?:named|called)\s+([A-Z][\w'\-]*(?:\s+[A-Z][\w'\-]*)?)", text)
    given_name = named.group(1) if named else ""
    if named:
        text = (text[:named.start()] + text[named.end():]).strip()
    text = re.sub(r"^[^,]{1,40},\s+(?=(?:a|an|the)\s)", "", text, flags=re.IGNORECASE)  # "Emma, a poet" → "a poet"
    words = _WORD.findall(text)
    while words and words[0].lower() in _ARTICLES:
        words.pop(0)
    split = next((i for i, w in enumerate(words) if i > 0 and w.lower() in _CLAUSE_WORDS), len(words))
    if words and words[0].lower() in _CLAUSE_WORDS:
        split = 0
    role_words, clause = words[:split], words[split:]
    if len(role_words) > 1 and role_words[-1].lower() in _PERSONA_WORDS:
        role_words = role_words[:-1]
    role_words = [w for w in role_words if w.lower() not in _ARTICLES]
    if role_words and all(w.lower() in _PERSONA_WORDS for w in role_words):
        role_words = []
    role = " ".join(role_words[:6]) or "companion"
    if role_words and role_words[0][:1].isupper() and not role_words[0].isupper():
        role = _lcfirst(role)
    topic = ""
    if clause:
        head = clause[0].lower()
        rest = [w for w in clause[1:] if w.lower() not in _ARTICLES]
        if head in _PREPOSITIONS:
            while rest and rest[0].lower() in _PREPOSITIONS | {"who", "that", "which"}:
                rest.pop(0)
            topic_words = [w for w in rest if w.lower() not in {"who", "that", "which"}][:4]
        else:
            # "who loves jazz" → "jazz"; "that helps people learn Spanish" → "Spanish";
            # "who writes haiku about snow" → "haiku about snow".
            if head in {"who", "that", "which", "whose"}:
                rest = rest[1:]  # the verb
            while rest and (rest[0].lower() in _PREPOSITIONS or rest[0].lower() in _STOPWORDS):
                rest.pop(0)
            verbs = [i for i, w in enumerate(rest) if w.lower() in _BASE_VERBS]
            if verbs and verbs[-1] < len(rest) - 1:
                rest = rest[verbs[-1] + 1:]
            topic_words = rest[:4]
        topic = " ".join(topic_words)
    if not topic:
        topic = f"the life of {_a(role)}"
    adjectives = [w.lower() for w in words if w.lower() in TRAITS]
    return Intent(role=role, topic=topic, adjectives=adjectives, name=given_name)
