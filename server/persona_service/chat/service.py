"""Chat: sessions, messages, and the persona replies behind them.

A reply (`PersonaReplies.respond`) is spoken with the persona's voice
profile (system prompt, then the sample dialogues as few-shot turns), then
checked before anyone sees it:

1. output moderation: a flagged reply records a moderation review (stage
   `output_content`), emits `moderation.flagged` and is refused with 422
   `moderation_blocked`;
2. voice drift: the reply is compared with the persona's voice fingerprint
   (see `drift_score`); above the threshold (persona → workspace → org →
   default) `persona.audit_failed` (reason `voice_drift`) is emitted and,
   with action `block`, the reply is refused with 409 `drift_blocked`; with
   `auto_recover` it is regenerated toward the voice (task "recover"),
   checked again, and delivered (a recovered reply that still drifts is
   refused too).

Refusals keep their review item and events (`err.persist`) but store and
bill nothing. Accounting is one atomic `UPDATE … RETURNING` per exchange,
which also claims the messages' ordinals. Sending is a generator yielding
progress (`message.started`, `message.delta`) so the unary RPC and its
server-sent-event form share it; `drain()` runs it. No per-message events.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import math
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

from persona_service.chat.records import (
    Exchange,
    MessageDelta,
    MessageProgress,
    MessageRecord,
    MessageStarted,
    NewMessage,
    NewSession,
    SessionChanges,
    SessionFilters,
    SessionRecord,
)
from persona_service.chat.repository import ChatSessionRepository
from persona_service.config.api import ConfigService
from persona_service.kernel.api import (
    ApiError,
    Completion,
    CursorCodec,
    Delta,
    GenerationOptions,
    Message,
    NotFound,
    Outbox,
    Principal,
    Provider,
    RunLost,
    StateConflict,
    ToolCall,
    Work,
    cursor_page,
    drain,
    embedding_identity,
    has_prefix,
    keyset_page,
    new_id,
    utcnow,
)
from persona_service.moderation.api import ModerationBlocked, record_flag
from persona_service.personas.api import PersonaDirectory, VoiceRecord, fingerprint_text
from persona_service.providers.pricing import PriceTable

THRESHOLD_KEY = "engine.pipeline.drift_detection.threshold"
ACTION_KEY = "engine.pipeline.drift_detection.action_on_alert"
HISTORY_MESSAGES = 50  # earlier messages of the session sent with each new one
RECOVERY_INSTRUCTION = (
    "Your previous reply drifted out of character. Answer the last message again, strictly in your own voice "
    "as described above."
)



class DriftBlocked(ApiError):
    code = "drift_blocked"



# --- drift ------------------------------------------------------------------------------


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


# (the embedding model's identity, the persona, its voice version, a digest of the lines and the fingerprint)
CalibrationKey = tuple[str, str, int, bytes]


class Calibrations:
    """Each voice version's drift calibration (`reference` in `drift_score`), kept in the process's memory so a
    reply embeds only its anchor and its own text, not the persona's lines again (issue 50: 9% of the servers'
    time on a chat reply went to them).

    The value is a function of the reference lines, the stored fingerprint and the embedding model alone, so it is
    keyed by all of them and never dropped: the embedding model's identity (its name and where it runs,
    kernel.models.embedding_identity: another model, or the same name elsewhere, never gets another's value), the
    persona and its voice version (another persona, in any tenant, never shares an entry) and a digest of the lines
    and the fingerprint themselves (a voice edited in place misses). Nothing mutable is in the key. A provider that
    gives no identity is never cached. This holds for an HTTP model too: its vectors are taken as a function of
    model and text (a real model's last-digit noise only makes the cached calibration steadier than a fresh one),
    and a cache saves a real model the call's largest inputs.

    Bounded: an LRU of `capacity` entries (a key and a float, about half a KB: 4,096 are about 2 MB a process),
    many more voice versions than a process replies for at a time; an evicted one is embedded again (~1 ms)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._values: OrderedDict[CalibrationKey, float] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: CalibrationKey) -> float | None:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: CalibrationKey, value: float) -> None:
        if not self.capacity:
            return
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.capacity:
                self._values.popitem(last=False)


CALIBRATIONS = Calibrations(4096)


def _reference_lines(voice: VoiceRecord) -> list[str]:
    """The persona's own lines (greeting, sample replies) that calibrate its drift."""
    return [line for line in [voice.greeting, *(d.persona for d in voice.sample_dialogues)] if line]


def _calibration_key(identity: str, voice: VoiceRecord, references: list[str]) -> CalibrationKey:
    digest = hashlib.sha256(json.dumps(references).encode())
    digest.update(struct.pack(f"<{len(voice.fingerprint)}d", *voice.fingerprint))
    return identity, voice.persona_id, voice.version, digest.digest()


def _reference(refs: Sequence[Sequence[float]], fingerprint: Sequence[float]) -> float:
    reference = sum(_cosine(r, fingerprint) for r in refs) / len(refs) if refs else 1.0
    return 1.0 if reference <= 0 else reference


def drift_score(provider: Provider, voice: VoiceRecord, user_text: str, reply: str,
                calibrations: Calibrations = CALIBRATIONS) -> float:
    """How far a reply is from the persona's voice, in [0, 1].

    similarity = cos(reply, anchor), the anchor being the voice's fingerprint
    text plus the user's message (an in-voice reply speaks as the persona
    about what was asked); it is calibrated per persona and embedding model
    by `reference` = the mean similarity of the persona's own lines
    (greeting, sample replies) to the stored fingerprint (kept per voice
    version: `Calibrations`). drift = (1 − similarity / reference)³, clamped
    to [0, 1]: the cube keeps the ordinary variation of in-voice replies near
    0 and off-voice replies high.
    """
    anchor_text = fingerprint_text(voice.as_output()) + "\n" + user_text
    references = _reference_lines(voice)
    identity = embedding_identity(provider)
    key = _calibration_key(identity, voice, references) if identity is not None and references else None
    reference = calibrations.get(key) if key is not None else None
    if reference is None:  # one call for all: the lines ride along with the anchor and the reply
        anchor, answer, *refs = provider.embed([anchor_text, reply, *references])
        reference = _reference(refs, list(voice.fingerprint))
        if key is not None:
            calibrations.put(key, reference)
    else:
        anchor, answer = provider.embed([anchor_text, reply])
    relative = min(1.0, max(0.0, 1.0 - _cosine(answer, anchor) / reference))
    return round(relative ** 3, 4)


# --- replies --------------------------------------------------------------------------


@dataclass
class Reply:
    text: str
    model: str
    input_tokens: int
    output_tokens: int
    finish_reason: str
    tool_calls: tuple[ToolCall, ...] = ()
    drift_score: float = 0.0
    recovered: bool = False
    cost_usd_micros: int = 0
    unpriced: bool = False  # the model has no price: cost_usd_micros is 0 but unknown
    # The deltas to forward, in order, for a streamed reply.
    deltas: list[Delta] = field(default_factory=list)


@dataclass
class Subject:
    """What a reply belongs to, for reviews and events."""

    type: str  # chat_session | chat_completion
    id: str


class PersonaReplies:
    """A persona's replies with moderation and drift detection."""

    def __init__(self, work: Work, provider: Provider | None, prices: PriceTable) -> None:
        if provider is None:
            raise RuntimeError("replies need a model provider")
        self.work = work
        self.provider = provider
        self.prices = prices
        self.outbox = Outbox(work)
        self.config = ConfigService(work)

    @staticmethod
    def voice_messages(voice: VoiceRecord, extra_system: str = "") -> list[Message]:
        system = voice.system_prompt + (("\n" + extra_system) if extra_system else "")
        messages = [Message("system", system)]
        for dialogue in voice.sample_dialogues:
            messages += [Message("user", dialogue.user), Message("assistant", dialogue.persona)]
        return messages

    def respond(self, principal: Principal, persona_id: str, voice: VoiceRecord, conversation: list[Message],
                options: GenerationOptions, subject: Subject, *, stream: bool = False, earlier: Sequence[str] = ()
                ) -> Generator[Delta, None, Reply]:
        """The reply, checked (moderation, voice drift) and priced. Streamed,
        its text is released sentence by sentence as the provider produces
        it, each sentence moderated before it goes out (nothing flagged ever
        reaches the client), except for a persona whose drift action is
        `auto_recover`: a reply that may be replaced is checked whole before
        any of it is released. A refusal after released text ends the stream
        with its error (the reply is not stored).

        `earlier`: the text deltas an earlier attempt released (its run was
        taken over): they go out again first, the provider continues from
        them, and the reply is their text and its continuation."""
        user_text = next((m.content for m in reversed(conversation) if m.role == "user"), "")
        live = stream and self.config.choice(principal, ACTION_KEY, persona_id) != "auto_recover"
        gate = (lambda text: self._moderate_text(principal, text, subject)) if live else None
        reply = yield from self._generate(self.voice_messages(voice) + conversation, options, stream, gate, earlier)
        # A gated reply's text was moderated whole by the gate's last pass.
        moderated = gate is not None and not reply.tool_calls
        reply = self._checked(principal, persona_id, voice, user_text, reply, conversation, options, subject, stream,
                              moderated)
        if not reply.text.startswith("".join(earlier)):
            raise RunLost(subject.id)  # recovered: a new reply, where part of another was already sent
        if stream and not live:
            yield from reply.deltas
        return self._priced(reply)

    def _checked(self, principal: Principal, persona_id: str, voice: VoiceRecord, user_text: str, reply: Reply,
                 conversation: list[Message], options: GenerationOptions, subject: Subject, stream: bool,
                 moderated: bool = False) -> Reply:
        if not moderated:
            self._moderate(principal, reply, subject)
        if not reply.text:
            return reply  # tool calls: nothing to compare with the voice
        reply.drift_score = drift_score(self.provider, voice, user_text, reply.text)
        threshold = self.config.number(principal, THRESHOLD_KEY, persona_id)
        if reply.drift_score <= threshold:
            return reply
        action = self.config.choice(principal, ACTION_KEY, persona_id)
        self._drift_event(principal, persona_id, subject, reply.drift_score, threshold, action)
        if action != "auto_recover":
            raise self._drift_blocked(reply.drift_score, threshold, action)
        first = reply
        recover = GenerationOptions(
            temperature=options.temperature, max_tokens=options.max_tokens, tools=options.tools,
            tool_choice=options.tool_choice, task="recover", model=options.model,
        )
        reply = drain(self._generate(self.voice_messages(voice, RECOVERY_INSTRUCTION) + conversation, recover, stream))
        reply.input_tokens += first.input_tokens
        reply.output_tokens += first.output_tokens
        reply.recovered = True
        self._moderate(principal, reply, subject)
        if reply.text:
            reply.drift_score = drift_score(self.provider, voice, user_text, reply.text)
            if reply.drift_score > threshold:
                raise self._drift_blocked(reply.drift_score, threshold, action)
        return reply

    def _generate(self, messages: list[Message], options: GenerationOptions, stream: bool,
                  gate: Callable[[str], None] | None = None, earlier: Sequence[str] = ()
                  ) -> Generator[Delta, None, Reply]:
        """One generation. With a `gate`, streamed deltas are yielded as they
        arrive, held only until their sentence ends and `gate` (which raises
        to refuse) has passed the text so far. It continues `earlier` (deltas
        released before, passed by the gate then): they are yielded first."""
        if not stream:
            done = self.provider.generate(messages, options)
            return Reply(done.text, done.model, done.input_tokens, done.output_tokens, done.finish_reason,
                         tuple(done.tool_calls))
        deltas = [Delta(text=text) for text in earlier]
        usage = None
        released = 0
        if gate is not None:
            yield from deltas
            released = len(deltas)
        if earlier:
            options = replace(options, continue_from="".join(earlier))
        for delta in self.provider.stream(messages, options):
            if delta.usage is not None:
                usage = delta.usage
            deltas.append(delta)
            if gate is not None and _SENTENCE_END.search(delta.text):
                gate("".join(d.text for d in deltas))
                yield from deltas[released:]
                released = len(deltas)
        if gate is not None and released < len(deltas):
            gate("".join(d.text for d in deltas))
            yield from deltas[released:]
        text = "".join(d.text for d in deltas)
        if usage is None:  # a provider that reports no usage: count nothing rather than guess
            usage = Completion(text, options.model, 0, 0)
        calls = _merge_tool_calls(deltas)
        finish = next((d.finish_reason for d in reversed(deltas) if d.finish_reason), usage.finish_reason)
        return Reply(text, usage.model, usage.input_tokens, usage.output_tokens, finish, calls, deltas=deltas)

    def _moderate(self, principal: Principal, reply: Reply, subject: Subject) -> None:
        self._moderate_text(principal, reply.text or " ".join(f"{c.name} {c.arguments}" for c in reply.tool_calls),
                            subject)

    def _moderate_text(self, principal: Principal, text: str, subject: Subject) -> None:
        """Refuse (raise, with a review item) text that moderation flags."""
        if not text:
            return
        result = self.provider.moderate(text)
        if not result.flagged:
            return
        review_id = record_flag(
            self.work, org_id=principal.org_id, workspace_id=principal.workspace_id, stage="output_content",
            subject_type=subject.type, subject_id=subject.id, text=text, result=result,
        )
        err = ModerationBlocked(
            "The reply failed moderation and was refused.",
            {"stage": "output_content", "categories": list(result.categories), "reviewId": review_id},
        )
        err.persist = True  # the review item and its event stand
        raise err

    def _drift_event(self, principal: Principal, persona_id: str, subject: Subject, score: float, threshold: float, action: str) -> None:
        self.outbox.emit("persona.audit_failed", principal.org_id, principal.workspace_id, {
            "personaId": persona_id, "reason": "voice_drift", "score": score, "threshold": threshold,
            "action": action, "subjectType": subject.type, "subjectId": subject.id,
        })

    @staticmethod
    def _drift_blocked(score: float, threshold: float, action: str) -> DriftBlocked:
        err = DriftBlocked(None, {"driftScore": score, "threshold": threshold, "action": action})
        err.persist = True  # the persona.audit_failed event stands
        return err

    def _priced(self, reply: Reply) -> Reply:
        reply.cost_usd_micros = self.prices.cost_micros(reply.model, reply.input_tokens, reply.output_tokens)
        reply.unpriced = not self.prices.priced(reply.model)
        return reply


_SENTENCE_END = re.compile(r"[.!?\n]")
P = TypeVar("P")  # an operation's progress event


def progress_of(deltas: Generator[Delta, None, Reply], event: Callable[[Delta], P | None]
                ) -> Generator[P, None, Reply]:
    """A reply's deltas as an operation's progress events (those `event` maps to one)."""
    while True:
        try:
            delta = next(deltas)
        except StopIteration as done:
            reply: Reply = done.value
            return reply
        progress = event(delta)
        if progress is not None:
            yield progress


def _merge_tool_calls(deltas: list[Delta]) -> tuple[ToolCall, ...]:
    calls: dict[int, list[str]] = {}
    for delta in deltas:
        if delta.tool_call is None:
            continue
        entry = calls.setdefault(delta.tool_call_index, ["", "", ""])
        entry[0] = entry[0] or delta.tool_call.id
        entry[1] = entry[1] or delta.tool_call.name
        entry[2] += delta.tool_call.arguments
    return tuple(ToolCall(*calls[i]) for i in sorted(calls))


# --- sessions --------------------------------------------------------------------------


@dataclass(frozen=True)
class Sampling:
    """A message's own sampling settings (None: the model's default)."""

    temperature: float | None = None
    max_tokens: int | None = None

    def options(self) -> GenerationOptions:
        return GenerationOptions(task="reply", temperature=self.temperature, max_tokens=self.max_tokens)


@dataclass(frozen=True)
class Speaking:
    """An active session and the voice its persona replies with."""

    session: SessionRecord
    voice: VoiceRecord


def billed_to(principal: Principal) -> str:
    """What usage is grouped by as its key: the API key id, or `session` for a signed-in user."""
    return principal.credential_id if principal.kind == "api_key" else "session"


def _ordinal(position: list[object]) -> int:
    """A message cursor's position: the ordinal of the page's last message."""
    if not isinstance(position[0], int):
        raise TypeError("not an ordinal")
    return position[0]


def session_of(principal: Principal, session_id: str, work: Work) -> SessionRecord:
    """GetChatSession, the hot read: the caller's workspace's session, from the server process's memory when it
    holds it (kernel.data.read_cache: every write of the row evicts it everywhere before it answers), the
    database (the call's connection, opened only then) otherwise."""
    return _found(session_id, lambda: ChatSessionRepository.remembered(principal.workspace_id, session_id, work))


def _found(session_id: str, read: Callable[[], SessionRecord | None]) -> SessionRecord:
    """The session `read` finds (a session's id only: anything else is not one), else 404."""
    row = read() if has_prefix("chat_session", session_id) else None
    if row is None:
        raise NotFound("chat session")
    return row


class ChatSessionService:
    def __init__(self, work: Work, provider: Provider | None = None, *, cursors: CursorCodec | None = None,
                 prices: PriceTable, clock: Callable[[], datetime] = utcnow) -> None:
        self.work = work
        self._repo = work.of(ChatSessionRepository)
        self.personas = PersonaDirectory(work)
        self.provider = provider
        self.cursors = cursors
        self.prices = prices  # the servicer's, loaded once when it was built
        self.clock = clock

    def get(self, principal: Principal, session_id: str) -> SessionRecord:
        return _found(session_id, lambda: self._repo.get(principal.workspace_id, session_id))

    def locked(self, principal: Principal, session_id: str) -> SessionRecord:
        """The session, locked for this unit of work: every write of a session starts here
        (kernel.data.aggregates), before it reads the messages it decides on; after the caller's membership, which
        the pipeline holds first in every write (kernel.transport.stages.hold)."""
        row = self._repo.lock(principal.workspace_id, session_id) if has_prefix("chat_session", session_id) else None
        if row is None:
            raise NotFound("chat session")
        return row

    def create(self, principal: Principal, persona_id: str, user_id: str = "", title: str = "",
               persona_version: int = 0) -> SessionRecord:
        """A new session of the persona (a create, or an OpenAI-compatible completion's first use), after the
        caller's membership, as every chat write (kernel.transport.stages.hold): its erasure locks it, then their
        personas, so beside the erasure it runs wholly before it or answers 401 after."""
        # Held FOR SHARE until the session commits: it cannot be deleted or changed meanwhile.
        if not self.personas.held(principal.workspace_id, persona_id):
            raise NotFound("persona")
        if persona_version and self.personas.voice(persona_id, persona_version) is None:
            raise NotFound("persona version", {"personaId": persona_id, "version": persona_version})
        now = self.clock()
        return self._repo.create(NewSession(
            id=new_id("chat_session"), org_id=principal.org_id, workspace_id=principal.workspace_id,
            persona_id=persona_id, user_id=user_id or principal.user_id, title=title, started_at=now,
            last_active_at=now, persona_version=persona_version or None,
        ))

    def list(self, principal: Principal, filters: SessionFilters, limit: int,
             cursor: str) -> tuple[list[SessionRecord], str]:
        return keyset_page(
            self.cursors, f"chat_sessions:{principal.workspace_id}", limit, cursor,
            lambda n, after: self._repo.list_page(principal.workspace_id, filters, n, after), "started_at",
        )

    def end(self, principal: Principal, session_id: str) -> SessionRecord:
        row = self.locked(principal, session_id)
        ended = self._repo.transition(row.id, ("active",), SessionChanges("ended", ended_at=self.clock()))
        if ended is None:
            raise self.conflict(self.get(principal, session_id), "Only an active session can be ended.")
        return ended

    def archive(self, principal: Principal, session_id: str) -> SessionRecord:
        row = self.locked(principal, session_id)
        changes = SessionChanges("archived", ended_at=self.clock() if row.ended_at is None else None)
        archived = self._repo.transition(row.id, ("active", "ended"), changes)
        if archived is None:
            raise self.conflict(self.get(principal, session_id), "The session is already archived.")
        return archived

    def messages(self, principal: Principal, session_id: str, limit: int,
                 cursor: str) -> tuple[builtins.list[MessageRecord], str]:
        """The session's messages, oldest first, keyset-paginated on their ordinal."""
        row = self.get(principal, session_id)
        return cursor_page(
            self.cursors, f"chat_messages:{row.id}", limit, cursor,
            lambda n, after: self._repo.messages_page(row.id, n, after or 0),
            lambda message: [message.ordinal], _ordinal,
        )

    def speaking(self, principal: Principal, session_id: str, *, lock: bool = True) -> Speaking:
        """An active session whose persona can still reply, with that persona; locked for a write
        (`lock=False` only where nothing is written: a preview)."""
        session = self.locked(principal, session_id) if lock else self.get(principal, session_id)
        if session.status != "active":
            raise self.conflict(session, "Messages can only be sent to an active session.")
        # Read without holding the persona (the model call must not hold it): whether it can still reply is
        # decided again, held FOR SHARE, where the reply is stored (`account`); what it replies with is the
        # version it read, which is the serial order running the reply before a change of the persona.
        # One read (issue 50): a reply needs of the persona only that it is active, and its voice.
        voice = self.personas.active_voice(principal.workspace_id, session.persona_id, session.persona_version,
                                           decides_nothing=True)
        if voice is None:
            raise StateConflict("The session's persona was deleted.", "personaId", {"personaId": session.persona_id})
        return Speaking(session, voice)

    def conversation(self, session_id: str, before_ordinal: int | None = None) -> builtins.list[Message]:
        """The history sent with a new message: the conversation's last HISTORY_MESSAGES messages."""
        return [Message(role, content) for role, content in
                self._repo.history_texts(session_id, HISTORY_MESSAGES, before_ordinal)]

    def reply(self, principal: Principal, speaking: Speaking, conversation: builtins.list[Message],
              sampling: Sampling, *, stream: bool = False, earlier: Sequence[str] = ()
              ) -> Generator[MessageDelta, None, Reply]:
        """The persona's reply to `conversation` (PersonaReplies.respond), its deltas as progress."""
        replies = PersonaReplies(self.work, self.provider, self.prices)
        return (yield from progress_of(
            replies.respond(principal, speaking.session.persona_id, speaking.voice, conversation, sampling.options(),
                            Subject("chat_session", speaking.session.id), stream=stream, earlier=earlier),
            lambda delta: MessageDelta(delta.text) if delta.text else None,
        ))

    def send(self, principal: Principal, session_id: str, content: str, sampling: Sampling | None = None, *,
             stream: bool = False, earlier: Sequence[str] = ()) -> Generator[MessageProgress, None, Exchange]:
        """A message and its reply; streamed, the reply continues `earlier` (PersonaReplies.respond)."""
        speaking = self.speaking(principal, session_id)
        history = self.conversation(speaking.session.id)
        yield MessageStarted()
        reply = yield from self.reply(principal, speaking, [*history, Message("user", content)],
                                      sampling or Sampling(), stream=stream, earlier=earlier)
        return self.record_exchange(principal, speaking.session.id, Message("user", content), reply)

    def record_exchange(self, principal: Principal, session_id: str, request: Message, reply: Reply) -> Exchange:
        """Account an exchange (atomically) and store its two messages: one statement (`account_exchange`: the
        messages take the ordinals the accounting claims), then the persona held as `account` holds it (a refusal
        rolls both back)."""
        now = self.clock()
        stored = self._repo.account_exchange(
            self.message_row(principal, session_id, 0, now, request.role, request.content),
            self.reply_row(principal, session_id, 0, now, reply), input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens, cost_usd_micros=reply.cost_usd_micros, unpriced=int(reply.unpriced),
            now=now)
        if stored is None:
            raise self.conflict(self.get(principal, session_id), "The session ended while the reply was produced.")
        session, user, answer = stored
        self._persona_held(principal, session)
        return Exchange(session, user, answer)

    def account(self, principal: Principal, session_id: str, reply: Reply, messages: int,
                now: datetime) -> SessionRecord:
        """Add a reply's usage (and `messages` new messages) to the session's counters, atomically."""
        session = self._repo.account(
            session_id, messages=messages, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
            cost_usd_micros=reply.cost_usd_micros, unpriced=int(reply.unpriced), now=now,
        )
        if session is None:
            raise self.conflict(self.get(principal, session_id), "The session ended while the reply was produced.")
        self._persona_held(principal, session)
        return session

    def _persona_held(self, principal: Principal, session: SessionRecord) -> None:
        """A reply is stored only while its persona is not deleted: held FOR SHARE from here to the commit."""
        if not self.personas.held(principal.workspace_id, session.persona_id):
            raise StateConflict("The session's persona was deleted.", "personaId", {"personaId": session.persona_id})

    @staticmethod
    def message_row(principal: Principal, session_id: str, ordinal: int, now: datetime, role: str,
                    content: str) -> NewMessage:
        """A new message without usage (a user's)."""
        return NewMessage(id=new_id("chat_message"), session_id=session_id, org_id=principal.org_id,
                          workspace_id=principal.workspace_id, ordinal=ordinal, role=role, content=content,
                          credential_id=billed_to(principal), created_at=now)

    @classmethod
    def reply_row(cls, principal: Principal, session_id: str, ordinal: int, now: datetime,
                  reply: Reply) -> NewMessage:
        """A new reply, with its usage."""
        content = reply.text
        if not content and reply.tool_calls:
            content = json.dumps([{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls])
        return replace(
            cls.message_row(principal, session_id, ordinal, now, "assistant", content), model=reply.model,
            input_tokens=reply.input_tokens, output_tokens=reply.output_tokens, cost_usd_micros=reply.cost_usd_micros,
            drift_score=reply.drift_score, recovered=reply.recovered, unpriced=reply.unpriced,
        )

    @staticmethod
    def conflict(row: SessionRecord, message: str) -> StateConflict:
        return StateConflict(message, "status", {"status": row.status})
