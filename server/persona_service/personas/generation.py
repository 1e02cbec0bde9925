"""The persona generation pipeline.

A run goes through STEPS in order; each step's output is recorded (with
timings and attempts) so a later regenerate can re-run from a chosen step
and keep the earlier outputs. The run is a generator: it yields progress
(`run.started`, `step.started`, `step.completed`) as it goes, which the
streaming RPC forwards as server-sent events, and returns the outputs.

Events: `generation.run.started` always, then `generation.run.completed` or
`generation.run.failed`. A failed run is kept (the error carries
`persist`, so the unit of work commits the run record, its events and the
audit entries of upstream failures while the caller gets the error).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import ParamSpec, Protocol, TypeVar

from persona.v1 import options_pb2, personas_pb2

from persona_service.kernel.api import (
    GENERATION_RUNS,
    GENERATION_STEPS,
    ApiError,
    DurableRun,
    GenerationOptions,
    Message,
    NoRun,
    Outbox,
    Provider,
    ProviderError,
    Work,
    new_id,
    utcnow,
)
from persona_service.moderation.api import ModerationBlocked, record_flag
from persona_service.personas.records import NewStep, PipelineProgress
from persona_service.personas.repository import PersonaRepository
from persona_service.personas.step_records import SOUL_FIELDS as SOUL_FIELDS  # (re-exported: the pipeline's)
from persona_service.personas.step_records import STEPS as STEPS
from persona_service.personas.step_records import (
    Audit,
    Dialogue,
    Fingerprint,
    IntentCheck,
    Soul,
    StepDone,
    StepOutput,
    StepOutputs,
    Voice,
)

T = TypeVar("T")
P = ParamSpec("P")


class ProviderCall(Protocol):
    """How a step calls its provider: `fn(*args)`, counted as an attempt, its upstream failure reported (the
    pipeline's `_step`); outside a run, the plain call."""

    def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T: ...


def _plain(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    return fn(*args, **kwargs)


# The text steps' instructions (the cost preview counts them as the steps send them).
SOUL_PROMPT = ("Design a persona. Answer with one JSON object with the fields: " + ", ".join(SOUL_FIELDS)
               + ". desire is at least 20 characters.")
VOICE_PROMPT = ("Write the voice profile of this persona as one JSON object with system_prompt, greeting, "
                "sample_dialogues (list of {user, persona}) and style_notes.")
AUDIT_PROMPT = "Score this persona from 0 to 1 for completeness and consistency. Answer with one JSON object {score, notes}."
# Typical answer sizes of the text steps, in tokens: the cost preview's estimate of what each answers.
TYPICAL_OUTPUT_TOKENS = {"draft_soul": 400, "write_voice": 600, "audit": 80}



@dataclass
class RunSpec:
    kind: str  # create | refine | fork | regenerate | import
    org_id: str
    workspace_id: str
    persona_id: str
    intent: str
    instruction: str = ""
    base_soul: Soul | None = None  # soul to refine or fork; on create, the caller's (partial: `Soul.given`)
    from_step: str = STEPS[0]
    previous: StepOutputs = field(default_factory=StepOutputs)  # earlier outputs (those a regeneration keeps)


@dataclass(frozen=True)
class RunResult:
    """What a run made that the persona and its version keep: the soul, the voice, the fingerprint and the
    audit's score, with whether the run has one (a regeneration of an imported persona from its fingerprint
    has no audit: the persona keeps its score)."""

    run_id: str
    soul: Soul
    voice: Voice
    fingerprint: Fingerprint
    audit_score: float | None = None
    audited: bool = False

    @classmethod
    def of(cls, run_id: str, outputs: StepOutputs) -> RunResult:
        assert outputs.draft_soul is not None and outputs.write_voice is not None and outputs.fingerprint is not None
        audit = outputs.audit
        return cls(run_id, outputs.draft_soul, outputs.write_voice, outputs.fingerprint,
                   audit.score if audit else None, audit is not None)


class GenerationPipeline:
    def __init__(self, work: Work, provider: Provider,
                 on_upstream_failure: Callable[[str, ProviderError], None] | None = None,
                 run: DurableRun | None = None) -> None:
        self.work = work
        # The durable run the call's operation is (a stream's), handed by the servicer from its call.
        self.durable = run or NoRun()
        self._repo = work.of(PersonaRepository)
        self.outbox = Outbox(work)
        self.provider = provider
        self.on_upstream_failure = on_upstream_failure or (lambda step, err: None)
        # The run's step rows, written in one statement as it ends (the same unit of work: nothing reads them
        # before it commits).
        self._steps: list[NewStep] = []
        self._started = utcnow()  # the run's start (`run`)

    def run(self, spec: RunSpec) -> Generator[PipelineProgress, None, RunResult]:
        # In a durable run (a stream) the generation run is that run: one id in `X-Run-Id`, the `id:` lines
        # and every frame's `runId`. Each step's answer is saved as it is made: a run another process takes
        # over repeats no finished step and streams the same events (kernel.transport.runs).
        run_id = self.durable.checkpoint("generation_run", lambda: self.durable.id or new_id("generation_run"))
        self._started = utcnow()
        self._steps = []  # (none of an attempt left unfinished)
        self._emit("generation.run.started", spec, {"runId": run_id, "personaId": spec.persona_id, "kind": spec.kind})
        yield PipelineProgress("run.started", run_id)
        outputs = StepOutputs()
        clock = time.monotonic()
        first = STEPS.index(spec.from_step)
        for ordinal, step in enumerate(STEPS):
            kept = spec.previous.get(step) if ordinal < first else None
            if kept is not None:
                outputs = outputs.with_output(step, kept)
                self._record_step(run_id, step, ordinal, "reused", 0, 0, kept)
                continue
            yield PipelineProgress("step.started", run_id, step)
            t0, attempts = time.monotonic(), [0]

            # The checkpoint is JSON (the step's output as its row stores it): a run taken over reads it back.
            def made(step: str = step, t0: float = t0, attempts: list[int] = attempts,
                     outputs: StepOutputs = outputs) -> dict[str, object]:
                output = self._step(step, spec, outputs, attempts)
                GENERATION_STEPS.labels(step, "completed").observe(time.monotonic() - t0)
                return StepDone(output, int((time.monotonic() - t0) * 1000), attempts[0] or 1).to_json()

            try:
                done = StepDone.from_json(step, self.durable.checkpoint(f"step.{step}", made))
            except ApiError as err:
                duration = int((time.monotonic() - t0) * 1000)
                GENERATION_STEPS.labels(step, "failed").observe(time.monotonic() - t0)
                GENERATION_RUNS.labels(spec.kind, "failed").inc()
                self._record_step(run_id, step, ordinal, "failed", duration, attempts[0] or 1, None, error=err)
                self._fail(run_id, spec, err)
                raise
            outputs = outputs.with_output(step, done.output)
            self._record_step(run_id, step, ordinal, "completed", done.duration_ms, done.attempts, done.output)
            yield PipelineProgress("step.completed", run_id, step, done.duration_ms)
        total = int((time.monotonic() - clock) * 1000)
        GENERATION_RUNS.labels(spec.kind, "completed").inc()
        self._write_run(run_id, spec, "completed")
        self._emit(
            "generation.run.completed", spec,
            {"runId": run_id, "personaId": spec.persona_id, "kind": spec.kind, "durationMs": total},
        )
        return RunResult.of(run_id, outputs)

    # --- steps ------------------------------------------------------------------

    def _step(self, step: str, spec: RunSpec, outputs: StepOutputs, attempts: list[int]) -> StepOutput:
        def call(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
            attempts[0] += 1
            try:
                return fn(*args, **kwargs)
            except ProviderError as err:
                self.on_upstream_failure(step, err)
                raise

        if step == "moderate_intent":
            text = "\n".join(t for t in (spec.intent, spec.instruction) if t)
            result = call(self.provider.moderate, text)
            if result.flagged:
                review_id = record_flag(
                    self.work, org_id=spec.org_id, workspace_id=spec.workspace_id, stage="input_intent",
                    subject_type="persona_intent", subject_id=spec.persona_id, text=text, result=result,
                )
                raise ModerationBlocked(
                    "The intent failed moderation.",
                    {"stage": "input_intent", "categories": list(result.categories), "reviewId": review_id},
                )
            return IntentCheck(flagged=False)
        if step == "draft_soul":
            return self._draft_soul(spec, call)
        if step == "write_voice":
            assert outputs.draft_soul is not None  # (an earlier step's)
            reply = call(self.provider.generate, [
                Message("system", VOICE_PROMPT),
                Message("user", json.dumps(outputs.draft_soul.to_json(), sort_keys=True)),
            ], GenerationOptions(task="voice", response_format="json"))
            voice = _answer(_json_object(reply.text, self.provider), self.provider,
                            texts=("system_prompt", "greeting", "style_notes"))
            if not voice.get("system_prompt"):
                raise unusable(self.provider, "voice without a system prompt")
            return Voice(
                str(voice["system_prompt"]), str(voice.get("greeting") or ""),
                _dialogues(voice.get("sample_dialogues"), self.provider), str(voice.get("style_notes") or ""),
            )
        if step == "audit":
            assert outputs.draft_soul is not None and outputs.write_voice is not None  # (earlier steps')
            return self.score(outputs.draft_soul, outputs.write_voice, call)
        if step == "fingerprint":
            assert outputs.write_voice is not None
            return self.fingerprint(outputs.write_voice, call)
        raise AssertionError(step)

    def fingerprint(self, voice: Voice, call: ProviderCall = _plain) -> Fingerprint:
        """The voice's fingerprint (the embedding drift detection compares replies with)."""
        vector = call(self.provider.embed, [fingerprint_text(voice)])[0]
        return Fingerprint([round(float(x), 6) for x in vector], _embedding_model(self.provider))

    def _draft_soul(self, spec: RunSpec, call: ProviderCall) -> Soul:
        # A caller's soul on create: the fields it sent are kept, the draft only fills the gaps (the model is shown
        # those); a persona's soul (refine, fork) is shown whole.
        caller = spec.base_soul if spec.kind == "create" else None
        given = caller.given() if caller is not None else {}
        if caller is not None and caller.complete:
            return normalize_soul(given, {})
        base = spec.base_soul.to_json() if spec.base_soul is not None else {}
        messages = [Message("system", SOUL_PROMPT), Message("user", spec.intent)]
        shown = given if caller is not None else base
        if shown:
            messages.append(Message("user", "Current soul: " + json.dumps(shown, sort_keys=True)))
        if spec.instruction:
            messages.append(Message("user", "Refine: " + spec.instruction))
        reply = call(self.provider.generate, messages, GenerationOptions(task="soul", response_format="json"))
        drafted = _answer(_json_object(reply.text, self.provider), self.provider, texts=_SOUL_TEXTS, lists=_SOUL_LISTS)
        soul = normalize_soul({**drafted, **given}, base)
        if len(soul.desire) < 20 or not soul.name:
            raise unusable(self.provider, "soul without a name or a 20-character desire")
        return soul

    def score(self, soul: Soul, voice: Voice, call: ProviderCall = _plain) -> Audit:
        reply = call(self.provider.generate, [
            Message("system", AUDIT_PROMPT),
            Message("user", json.dumps({"soul": soul.to_json(), "voice": voice.to_json()}, sort_keys=True)),
        ], GenerationOptions(task="audit", response_format="json"))
        data = _answer(_json_object(reply.text, self.provider), self.provider, texts=("notes",))
        score = data.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float) or math.isnan(score):
            raise unusable(self.provider, "audit without a numeric score")
        return Audit(min(1.0, max(0.0, float(score))), str(data.get("notes") or ""))

    # --- records ----------------------------------------------------------------

    def _record_step(self, run_id: str, step: str, ordinal: int, status: str, duration_ms: int, attempts: int,
                     output: StepOutput | None, error: ApiError | None = None) -> None:
        now = utcnow()
        self._steps.append(NewStep(
            run_id=run_id, step=step, ordinal=ordinal, status=status, started_at=now, finished_at=now,
            duration_ms=duration_ms, attempts=attempts, output=output,
            error={"code": error.code, "message": error.message} if error is not None else None,
        ))

    def _write_run(self, run_id: str, spec: RunSpec, status: str, error_code: str = "") -> None:
        """The run as it ended and its steps (written only then: nothing reads them before the unit of work
        commits, and a run that ends neither way rolls back with it)."""
        self._repo.add_run(
            id=run_id, org_id=spec.org_id, workspace_id=spec.workspace_id, persona_id=spec.persona_id, kind=spec.kind,
            status=status, from_step=spec.from_step if spec.kind == "regenerate" else "", started_at=self._started,
            finished_at=utcnow(), error_code=error_code, steps=self._steps,
        )
        self._steps = []

    def _fail(self, run_id: str, spec: RunSpec, err: ApiError) -> None:
        self._write_run(run_id, spec, "failed", err.code)
        self._emit(
            "generation.run.failed", spec,
            {"runId": run_id, "personaId": spec.persona_id, "kind": spec.kind, "errorCode": err.code},
        )
        err.persist = True  # keep the failed run, its events and audit entries

    def _emit(self, type_: str, spec: RunSpec, data: dict[str, object]) -> None:
        self.outbox.emit(type_, spec.org_id, spec.workspace_id, data)


# The Soul message's own limits (its field rules): what a provider drafts is
# held to them, so an answer never breaks the contract the API publishes.
SOUL_LIMITS = {f.name: f.GetOptions().Extensions[options_pb2.rules].max_len for f in personas_pb2.Soul.DESCRIPTOR.fields}


def normalize_soul(raw: Mapping[str, object], fallback: Mapping[str, object]) -> Soul:
    """A drafted (or a caller's) soul held to the Soul message's limits; `fallback`'s fields where it has none."""
    def text(name: str) -> str:
        return str(raw.get(name, fallback.get(name)) or "")[:SOUL_LIMITS.get(name) or None]

    def items(name: str) -> tuple[str, ...]:
        value = raw.get(name, fallback.get(name))  # (a list of texts: the callers checked it)
        return tuple(str(v) for v in (value if isinstance(value, list | tuple) else ()))[:SOUL_LIMITS.get(name) or None]

    return Soul(text("name"), text("desire"), text("fear"), text("backstory"), items("traits"), items("values"),
                text("speaking_style"))


def estimate_steps(intent: str, soul: Soul | None,
                   count: Callable[[str], int]) -> list[tuple[str, int, int]]:
    """(step, input tokens, output tokens) a create run would spend, estimated
    from the prompts the steps send (`count` tokens a text) and each text
    step's typical answer (TYPICAL_OUTPUT_TOKENS); the cost preview's basis."""
    given = soul.given() if soul is not None else {}
    soul_text = json.dumps(given, sort_keys=True) if given else ""
    drafted = soul is None or not soul.complete
    soul_tokens = TYPICAL_OUTPUT_TOKENS["draft_soul"] if drafted else count(soul_text)
    voice_tokens = TYPICAL_OUTPUT_TOKENS["write_voice"]
    return [
        ("moderate_intent", count(intent), 0),
        ("draft_soul", count(SOUL_PROMPT) + count(intent) + count(soul_text), soul_tokens) if drafted
        else ("draft_soul", 0, 0),
        ("write_voice", count(VOICE_PROMPT) + soul_tokens, voice_tokens),
        ("audit", count(AUDIT_PROMPT) + soul_tokens + voice_tokens, TYPICAL_OUTPUT_TOKENS["audit"]),
        ("fingerprint", voice_tokens, 0),
    ]


def fingerprint_text(voice: Voice) -> str:
    lines = [voice.system_prompt, voice.greeting, *(d.persona for d in voice.sample_dialogues)]
    return "\n".join(line for line in lines if line)


def _embedding_model(provider: Provider) -> str:
    return getattr(provider, "embedding_model", "") or f"{getattr(provider, 'name', 'provider')}-embedding"


def unusable(provider: Provider, reason: str) -> ProviderError:
    """A chat answer the pipeline cannot use (a model that does not follow the JSON instructions): the
    reason, ours and fixed, is in the caller's details (`reason` `reply_not_json`, `upstreamMessage`) beside the
    operation."""
    return ProviderError(getattr(provider, "name", "provider"), reason, operation="chat.completions",
                         kind="reply_not_json", upstream_message=reason)


_SOUL_TEXTS = ("name", "desire", "fear", "backstory", "speaking_style")
_SOUL_LISTS = ("traits", "values")


def _answer(answer: dict[str, object], provider: Provider, texts: tuple[str, ...] = (),
            lists: tuple[str, ...] = ()) -> dict[str, object]:
    """A model's JSON answer whose fields the step reads are of their types: `texts` strings, `lists` arrays of
    strings (absent or null: not given). Anything else is an answer the pipeline cannot use, naming the field:
    never a value stringified into the persona (`{'a': 1}` as a name, a string's letters as traits) nor a 500."""
    for name in texts:
        if answer.get(name) is not None and not isinstance(answer[name], str):
            raise unusable(provider, f"the reply's `{name}` was not text")
    for name in lists:
        value = answer.get(name)
        if value is not None and not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
            raise unusable(provider, f"the reply's `{name}` was not a list of texts")
    return answer


def _dialogues(value: object, provider: Provider) -> tuple[Dialogue, ...]:
    """A voice answer's `sample_dialogues`: a list of objects whose `user` and `persona` are text."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise unusable(provider, "the reply's `sample_dialogues` was not a list of objects")
    lines = [_answer(item, provider, texts=("user", "persona")) for item in value]
    return tuple(Dialogue(str(line.get("user") or ""), str(line.get("persona") or "")) for line in lines)


def _json_object(text: str, provider: Provider) -> dict[str, object]:
    try:
        start, end = text.index("{"), text.rindex("}") + 1
        value = json.loads(text[start:end])
    except ValueError:
        raise unusable(provider, "the reply was not a JSON object") from None
    if not isinstance(value, dict):
        raise unusable(provider, "the reply was not a JSON object")
    return value
