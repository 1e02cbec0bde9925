"""The generation pipeline's step outputs, typed (issue 47): code reads their fields; JSON is only their shape
where they are stored (a durable run's checkpoints, the step rows, the version rows). `to_json` writes the
shape those have always held, key for key, and `from_json` reads it back, so rows and checkpoints saved before
these records still load."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from persona_service.personas.json_support import JSONObject, as_object, items, number, whole

STEPS = ("moderate_intent", "draft_soul", "write_voice", "audit", "fingerprint")
SOUL_FIELDS = ("name", "desire", "fear", "backstory", "traits", "values", "speaking_style")


@dataclass(frozen=True, slots=True)
class IntentCheck:
    """`moderate_intent`'s output: a flagged intent stops the run, so a kept one says it was not."""

    flagged: bool = False

    def to_json(self) -> dict[str, bool]:
        return {"flagged": self.flagged}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> IntentCheck:
        return cls(bool(data.get("flagged", False)))


@dataclass(frozen=True, slots=True)
class Soul:
    """`draft_soul`'s output: the persona's soul (the API's Soul message; stored as the persona's `soul`)."""

    name: str
    desire: str
    fear: str = ""
    backstory: str = ""
    traits: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    speaking_style: str = ""

    def to_json(self) -> dict[str, str | list[str]]:
        # (SOUL_FIELDS' order: the one stored souls have)
        return {"name": self.name, "desire": self.desire, "fear": self.fear, "backstory": self.backstory,
                "traits": list(self.traits), "values": list(self.values), "speaking_style": self.speaking_style}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Soul:
        return cls(str(data.get("name") or ""), str(data.get("desire") or ""), str(data.get("fear") or ""),
                   str(data.get("backstory") or ""), tuple(str(t) for t in items(data.get("traits"))),
                   tuple(str(v) for v in items(data.get("values"))), str(data.get("speaking_style") or ""))

    def given(self) -> dict[str, str | list[str]]:
        """The fields set (not empty), as JSON: a caller's soul is partial (the API's Soul message, proto3: an
        empty field is one not sent), and what it sent is what a create keeps and shows the model."""
        return {name: value for name, value in self.to_json().items() if value}

    @property
    def complete(self) -> bool:
        """Every field set: a caller's soul the draft step keeps whole (no model is called)."""
        return len(self.given()) == len(SOUL_FIELDS)

    def texts(self) -> list[str]:
        """Its strings in the order a persona row's soul reads back from PostgreSQL (JSONB keeps an object's keys
        by length, then bytewise: fear, name, desire, traits, values, backstory, speaking_style): the text a
        marketplace review moderates, and the excerpt a flag of it keeps, are the ones they were when the
        review read the soul as a dict."""
        return [self.fear, self.name, self.desire, *self.traits, *self.values, self.backstory, self.speaking_style]


@dataclass(frozen=True, slots=True)
class Dialogue:
    user: str
    persona: str

    @staticmethod
    def to_json_list(dialogues: Iterable[Dialogue]) -> list[dict[str, str]]:
        """Sample dialogues as a voice's JSON holds them (a version's `voice`, a voice profile's column)."""
        return [{"user": d.user, "persona": d.persona} for d in dialogues]

    @staticmethod
    def from_json_list(data: object) -> tuple[Dialogue, ...]:
        return tuple(Dialogue(str(d.get("user") or ""), str(d.get("persona") or ""))
                     for d in items(data) if isinstance(d, Mapping))


@dataclass(frozen=True, slots=True)
class Voice:
    """`write_voice`'s output: the persona's voice profile."""

    system_prompt: str
    greeting: str = ""
    sample_dialogues: tuple[Dialogue, ...] = ()
    style_notes: str = ""

    def to_json(self) -> dict[str, str | list[dict[str, str]]]:
        return {
            "system_prompt": self.system_prompt, "greeting": self.greeting,
            "sample_dialogues": Dialogue.to_json_list(self.sample_dialogues),
            "style_notes": self.style_notes,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Voice:
        return cls(
            str(data.get("system_prompt") or ""), str(data.get("greeting") or ""),
            Dialogue.from_json_list(data.get("sample_dialogues")),
            str(data.get("style_notes") or ""),
        )


@dataclass(frozen=True, slots=True)
class Audit:
    """`audit`'s output: the score from 0 to 1 (None for an imported persona's, which no model scored)."""

    score: float | None
    notes: str = ""

    def to_json(self) -> dict[str, float | str | None]:
        return {"score": self.score, "notes": self.notes}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Audit:
        score = data.get("score")
        return cls(None if score is None else number(score), str(data.get("notes", "")))


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """`fingerprint`'s output: the voice's embedding (what drift detection compares replies with) and its model."""

    vector: list[float]
    model: str

    def to_json(self) -> dict[str, list[float] | str]:
        return {"vector": list(self.vector), "model": self.model}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Fingerprint:
        vector = data["vector"]
        if not isinstance(vector, list):
            raise TypeError(f"a fingerprint's vector is a list, not {type(vector).__name__}")
        return cls([number(x) for x in vector], str(data["model"]))


StepOutput = IntentCheck | Soul | Voice | Audit | Fingerprint


@dataclass(frozen=True, slots=True)
class StepOutputs:
    """A run's outputs so far (or a regeneration's kept ones), one field a step (field names are STEPS)."""

    moderate_intent: IntentCheck | None = None
    draft_soul: Soul | None = None
    write_voice: Voice | None = None
    audit: Audit | None = None
    fingerprint: Fingerprint | None = None

    def get(self, step: str) -> StepOutput | None:
        """`step`'s output, None if it has none yet."""
        return {"moderate_intent": self.moderate_intent, "draft_soul": self.draft_soul,
                "write_voice": self.write_voice, "audit": self.audit, "fingerprint": self.fingerprint}[step]

    def with_output(self, step: str, output: StepOutput) -> StepOutputs:
        """These outputs and `step`'s (its record: a step given another's is a TypeError)."""
        if step == "moderate_intent" and isinstance(output, IntentCheck):
            return replace(self, moderate_intent=output)
        if step == "draft_soul" and isinstance(output, Soul):
            return replace(self, draft_soul=output)
        if step == "write_voice" and isinstance(output, Voice):
            return replace(self, write_voice=output)
        if step == "audit" and isinstance(output, Audit):
            return replace(self, audit=output)
        if step == "fingerprint" and isinstance(output, Fingerprint):
            return replace(self, fingerprint=output)
        if step not in STEPS:
            raise KeyError(step)
        raise TypeError(f"{step}: {type(output).__name__}")

    @classmethod
    def from_json(cls, outputs: Mapping[str, Mapping[str, object] | None]) -> StepOutputs:
        """Stored outputs by step name (a run's step rows): the steps absent or None stay None."""
        decoded = cls()
        for step, data in outputs.items():
            if step in STEPS and data is not None:
                decoded = decoded.with_output(step, decode(step, data))
        return decoded


def decode(step: str, data: Mapping[str, object]) -> StepOutput:
    """A step's stored output (its JSON) as its record."""
    if step == "moderate_intent":
        return IntentCheck.from_json(data)
    if step == "draft_soul":
        return Soul.from_json(data)
    if step == "write_voice":
        return Voice.from_json(data)
    if step == "audit":
        return Audit.from_json(data)
    if step == "fingerprint":
        return Fingerprint.from_json(data)
    raise KeyError(step)


def encode(output: StepOutput) -> JSONObject:
    """A step's output as it is stored."""
    return {**output.to_json()}


@dataclass(frozen=True, slots=True)
class StepDone:
    """A step as it finished: what a durable run's checkpoint `step.<name>` keeps (a run taken over reads it
    back instead of running the step again)."""

    output: StepOutput
    duration_ms: int
    attempts: int

    def to_json(self) -> JSONObject:
        return {"output": encode(self.output), "duration_ms": self.duration_ms, "attempts": self.attempts}

    @classmethod
    def from_json(cls, step: str, data: Mapping[str, object]) -> StepDone:
        output = as_object(data["output"])
        if output is None:
            raise TypeError(f"step {step}'s checkpointed output is not an object")
        return cls(decode(step, output), whole(data["duration_ms"]), whole(data["attempts"]))
