"""The drift check's calibration kept per voice version (chat.service.Calibrations, issue 50): a reply's drift score
is the same with and without it, a later reply of the same voice version embeds only its anchor and its own text,
and another voice version, persona, edit or embedding model is never answered with another's calibration."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from persona_service.chat.service import Calibrations, PersonaReplies, drift_score
from persona_service.kernel.models import GenerationOptions, Message
from persona_service.personas.api import VoiceRecord, fingerprint_text
from persona_service.personas.step_records import Dialogue, Voice
from persona_service.providers.local import LocalProvider
from persona_service.providers.retrying import Retrying


class Counting:
    """A provider wrapper, as the real ones are (everything but `embed` passed through): the texts of each embed
    call."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.name = provider.name
        self.calls: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        if name == "provider" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.provider, name)

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.provider.embed(texts)


class Anonymous(Counting):
    """One that says nothing of its embedding model."""

    embedding_identity = None


def voice_of(provider: LocalProvider, intent: str, persona_id: str = "per_1", version: int = 1) -> VoiceRecord:
    profile = provider.voice_from_soul(provider.soul_from_intent(intent))
    return VoiceRecord(
        persona_id=persona_id, version=version, system_prompt=profile["system_prompt"], greeting=profile["greeting"],
        sample_dialogues=Dialogue.from_json_list(profile["sample_dialogues"]), style_notes=profile["style_notes"],
        fingerprint=[round(x, 6) for x in provider.embed([fingerprint_text(Voice.from_json(profile))])[0]],
        fingerprint_model="local-embedding", updated_at=datetime(2026, 12, 2, tzinfo=UTC),
    )


def spoken(provider: LocalProvider, voice: VoiceRecord, text: str) -> str:
    messages = PersonaReplies.voice_messages(voice) + [Message("user", text)]
    return provider.generate(messages, GenerationOptions()).text


@pytest.fixture(scope="module")
def local() -> LocalProvider:
    return LocalProvider()


@pytest.fixture(scope="module")
def voice(local) -> VoiceRecord:
    return voice_of(local, "A grumpy lighthouse keeper who loves jazz")


QUESTIONS = ("How was the storm last night?", "What are you listening to?", "[[drift]] what now?")


def test_scores_equal_with_and_without_the_cache(local, voice):
    cache = Calibrations(16)
    for question in QUESTIONS:
        reply = spoken(local, voice, question)
        uncached = drift_score(local, voice, question, reply, Calibrations(0))
        assert drift_score(local, voice, question, reply, cache) == uncached  # the first reply fills the entry
        assert drift_score(local, voice, question, reply, cache) == uncached  # a later one reads it
    assert drift_score(local, voice, "x", spoken(local, voice, "[[drift]] x"), cache) > 0.35  # off-voice stays off


def test_a_later_reply_embeds_only_its_anchor_and_its_text(local, voice):
    provider, cache = Counting(Retrying(local, delays=(0, 0, 0))), Calibrations(16)
    lines = 1 + len(voice.sample_dialogues)
    first, second = (spoken(local, voice, q) for q in QUESTIONS[:2])
    drift_score(provider, voice, QUESTIONS[0], first, cache)
    drift_score(provider, voice, QUESTIONS[1], second, cache)
    assert [len(texts) for texts in provider.calls] == [2 + lines, 2]  # one call each; the lines only once
    assert provider.calls[1][1] == second and voice.greeting not in provider.calls[1]


@pytest.mark.parametrize("other", ["new version", "another persona", "edited in place", "another model"])
def test_another_voice_or_model_is_not_served_the_old_calibration(local, voice, other):
    cache = Calibrations(16)
    question = QUESTIONS[0]
    reply = spoken(local, voice, question)
    drift_score(local, voice, question, reply, cache)
    renewed = voice_of(local, "A cheerful baker who sings opera", version=2)
    changed, provider = {
        "new version": (renewed, local),
        "another persona": (replace(voice, persona_id="per_2"), local),
        "edited in place": (replace(renewed, version=1), local),
        "another model": (voice, LocalProvider(embedding_dims=128)),
    }[other]
    counting = Counting(provider)
    score = drift_score(counting, changed, question, reply, cache)
    lines = 1 + len(changed.sample_dialogues)
    assert [len(texts) for texts in counting.calls] == [2 + lines]  # its own lines embedded: a miss
    assert score == drift_score(provider, changed, question, reply, Calibrations(0))


def test_a_provider_without_an_embedding_identity_is_never_cached(local, voice):
    provider, cache = Anonymous(local), Calibrations(16)
    reply = spoken(local, voice, QUESTIONS[0])
    for _ in range(2):
        drift_score(provider, voice, QUESTIONS[0], reply, cache)
    assert [len(texts) for texts in provider.calls] == [2 + 1 + len(voice.sample_dialogues)] * 2


def test_the_cache_is_bounded(local, voice):
    cache, provider = Calibrations(2), Counting(local)
    reply = spoken(local, voice, QUESTIONS[0])
    versions = [replace(voice, version=n) for n in (1, 2, 3)]
    for version in [*versions, versions[0]]:  # the first is evicted by the third: embedded again
        drift_score(provider, version, QUESTIONS[0], reply, cache)
    assert [len(texts) > 2 for texts in provider.calls] == [True, True, True, True]
    drift_score(provider, versions[0], QUESTIONS[0], reply, cache)  # now kept
    assert len(provider.calls[-1]) == 2
