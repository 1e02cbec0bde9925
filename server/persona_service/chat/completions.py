"""The OpenAI-compatible surface: personas as models, chat completions.

A model id is `persona://<persona uuid>`, or `persona://<persona
uuid>@<version>` for a model pinned to one version of the persona (its
replies use that version's voice); percent-encoded forms are decoded. A completion speaks with the persona's voice and follows the chat
rules (`chat.PersonaReplies`: moderation, drift detection); it is accounted
like a chat message in the caller's completions session for the persona:
the active session with user id = the request's `user` (or
`openai:<credential id>`) and title `chat.completions`, created on first
use under a transaction-scoped advisory lock so concurrent first uses make
one session. Each completion adds two messages (the last request message
and the reply), its tokens and its cost.
"""

from __future__ import annotations

import re
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from persona_service.chat.repository import ChatSessionRepository
from persona_service.chat.service import ChatSessionService, PersonaReplies, Reply, Subject, progress_of
from persona_service.kernel.api import (
    Delta,
    GenerationOptions,
    Message,
    NotFound,
    Principal,
    Provider,
    ValidationFailed,
    Violation,
    Work,
    credentials_used,
    is_uuid,
    new_id,
)
from persona_service.kernel.api import Subject as PersonalSubject
from persona_service.personas.api import PersonaDirectory, PersonaRecord, PersonaSummary
from persona_service.providers.pricing import PriceTable

MODEL_SCHEME = "persona://"
SESSION_TITLE = "chat.completions"
AUDIT_ACTION = "chat_completion.create"  # both RPCs' (proto/persona/v1/openai.proto)


def credential_user(credential_id: str) -> str:
    """The completions session's user of a completion without `user`: its credential's."""
    return f"openai:{credential_id}"


def users_of(work: Work, subject: PersonalSubject) -> list[str]:
    """The sessions' user ids that are the subject's (their export and erasure): their own id, and the credential's
    of each credential they asked for a completion with (`credential_user`: an API key of theirs, a session JWT).
    Those sessions hold what they sent through it; a completion's `user` names someone else's (an end user of
    the caller's app), who is erased by that name, not with the caller."""
    return [subject.user_id, *map(credential_user, credentials_used(work, subject, AUDIT_ACTION))]


def model_id(persona_id: str, version: int = 0) -> str:
    return MODEL_SCHEME + persona_id + (f"@{version}" if version else "")


def persona_of(model: str) -> tuple[str, int] | None:
    """The persona uuid and pinned version (0: not pinned) of a model id (raw or percent-encoded), or None."""
    for _ in range(3):  # tolerate double encoding
        decoded = unquote(model)
        if decoded == model:
            break
        model = decoded
    if not model.startswith(MODEL_SCHEME):
        return None
    persona_id, pinned, version = model[len(MODEL_SCHEME):].partition("@")
    if not is_uuid(persona_id) or (pinned and not re.fullmatch(r"[1-9][0-9]{0,8}", version)):
        return None
    return persona_id, int(version) if pinned else 0


@dataclass(frozen=True, slots=True)
class CompletionStarted:
    """A completion's stream began, under its id and creation time (an earlier attempt's, when taken over)."""

    id: str
    created: int


@dataclass(frozen=True, slots=True)
class CompletionDelta:
    """A piece of the reply (text or a tool call's), as the model streamed it."""

    delta: Delta


# What `CompletionService.complete` yields as it goes.
CompletionProgress = CompletionStarted | CompletionDelta


@dataclass(frozen=True, slots=True)
class Completed:
    id: str  # chatcmpl-…
    created: int  # unix seconds
    reply: Reply


class CompletionService:
    def __init__(self, work: Work, provider: Provider | None, prices: PriceTable) -> None:
        self.work = work
        self._repo = work.of(ChatSessionRepository)
        self.personas = PersonaDirectory(work)
        self.sessions = ChatSessionService(work, prices=prices)
        self.provider = provider
        self.prices = prices

    def models(self, principal: Principal) -> list[PersonaSummary]:
        return self.personas.active_list(principal.workspace_id)

    def model(self, principal: Principal, model: str) -> tuple[PersonaRecord, int]:
        """The persona a model id names and its pinned version (0: the current one)."""
        parsed = persona_of(model)
        # Read without holding the persona (a completion's model call must not hold it): a completion that
        # stores its exchange decides again, held FOR SHARE, where it does (ChatSessionService.account).
        row = self.personas.active(principal.workspace_id, parsed[0], decides_nothing=True) if parsed else None
        if row is None or parsed is None or (
                parsed[1] and self.personas.voice(row.id, parsed[1], decides_nothing=True) is None):
            raise NotFound("model", {"model": unquote(model)})
        return row, parsed[1]

    def complete(self, principal: Principal, model: str, conversation: list[Message], options: GenerationOptions,
                 user: str = "", *, stream: bool = False, earlier: Sequence[str] = (),
                 started: tuple[str, int] | None = None) -> Generator[CompletionProgress, None, Completed]:
        """A completion; streamed, it continues `earlier` (PersonaReplies.respond) under the id and
        creation time an earlier attempt `started` it with."""
        if not any(m.role in ("user", "tool") for m in conversation):
            raise ValidationFailed([Violation("messages", "required", None, {"contains": "a user message"})])
        # The caller's membership is held first, as in every write (kernel.transport.stages.hold; the declared order:
        # membership, then the (persona, user) lock and the session, then the persona): their erasure locks it before
        # their personas and sessions, so a completion runs wholly before the erasure or answers 401 after it.
        persona, version = self.model(principal, model)
        voice = self.personas.voice(persona.id, version or None, decides_nothing=True)  # (as `model`)
        if voice is None:
            raise NotFound("model", {"model": model_id(persona.id, version)})
        completion_id, created = started or ("chatcmpl-" + new_id("request").split("_", 1)[1], int(time.time()))
        yield CompletionStarted(completion_id, created)
        replies = PersonaReplies(self.work, self.provider, self.prices)
        reply = yield from progress_of(
            replies.respond(principal, persona.id, voice, conversation, options,
                            Subject("chat_completion", completion_id), stream=stream, earlier=earlier),
            lambda delta: CompletionDelta(delta) if delta.text or delta.tool_call is not None else None,
        )
        self._account(principal, persona.id, user or credential_user(principal.credential_id), conversation[-1], reply)
        return Completed(completion_id, created, reply)

    def _account(self, principal: Principal, persona_id: str, user_id: str, request: Message, reply: Reply) -> None:
        """Store the exchange in the caller's completions session (made on first use: `open`, the membership
        held by `complete`)."""
        key = (principal.workspace_id, persona_id, user_id, SESSION_TITLE)
        session = self._repo.completions_session(*key)
        if session is None:  # a first use: the persona held (its place in the lock order), then the key by name
            if not self.personas.held(principal.workspace_id, persona_id):
                raise NotFound("persona")
            self._repo.first_use(*key)
            session = self._repo.completions_session(*key) or self.sessions.create(
                principal, persona_id, user_id=user_id, title=SESSION_TITLE)
        self.sessions.record_exchange(principal, session.id, Message(request.role, request.content), reply)
