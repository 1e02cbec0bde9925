"""Chat controls: regenerate the last reply (its alternatives, "swipes", are
kept and one is chosen), edit or delete a message (the later messages are
removed: they followed the old text), and preview what a message would use.

A removed message keeps its row (text erased, `deleted_at` set) so that its
usage, billed when it was produced, still counts in usage over time; its
ordinal stays claimed (the session's `removed_messages`). Every change is
checked against an active session, as sending is. Each locks the session's
row before it reads the message it changes (`ChatSessionService.locked`,
kernel.data.aggregates): two changes at once, or a change and a send, run
one after the other, each deciding on what the other left.
"""

from __future__ import annotations

from dataclasses import dataclass

from persona_service.chat.records import MessageRecord, SessionRecord
from persona_service.chat.repository import ChatSessionRepository
from persona_service.chat.service import HISTORY_MESSAGES, ChatSessionService, PersonaReplies, Sampling
from persona_service.kernel.api import (
    Limits,
    Message,
    NotFound,
    Principal,
    StateConflict,
    ValidationFailed,
    Violation,
    drain,
    has_prefix,
)
from persona_service.providers.local import message_tokens

MAX_ALTERNATIVES = 10  # a reply's alternatives kept at once
DEFAULT_REPLY_TOKENS = 120  # a preview's output estimate in a session without replies


@dataclass(frozen=True, slots=True)
class Regenerated:
    session: SessionRecord
    replied_to: MessageRecord | None  # the message the reply answers (None only in an empty conversation)
    reply: MessageRecord


@dataclass(frozen=True, slots=True)
class Change:
    session: SessionRecord
    message: MessageRecord | None  # the edited message; None for a delete
    removed: int


@dataclass(frozen=True, slots=True)
class QuotaUse:
    name: str
    units: int
    limit: int
    window_seconds: int


@dataclass(frozen=True, slots=True)
class Preview:
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd_micros: int
    quota: tuple[QuotaUse, ...]
    unpriced: bool = False  # the model has no price: the cost is unknown, not 0


class ChatControls:
    def __init__(self, sessions: ChatSessionService) -> None:
        self.sessions = sessions
        self._repo = sessions.work.of(ChatSessionRepository)

    def _message(self, session: SessionRecord, message_id: str) -> MessageRecord:
        row = self._repo.message(session.id, message_id) if has_prefix("chat_message", message_id) else None
        if row is None:
            raise NotFound("chat message")
        return row

    def _active(self, principal: Principal, session_id: str) -> SessionRecord:
        session = self.sessions.locked(principal, session_id)
        if session.status != "active":
            raise self.sessions.conflict(session, "Messages of a session that is not active cannot change.")
        return session

    def _last(self, session: SessionRecord, message: MessageRecord) -> None:
        if message.ordinal != self._repo.last_ordinal(session.id):
            raise StateConflict("Only the session's last message can change this way.", "id", {"id": message.id})

    @staticmethod
    def _alternatives_left(message: MessageRecord) -> None:
        if message.role == "assistant" and message.swipe_count >= MAX_ALTERNATIVES:
            raise StateConflict(f"A reply keeps at most {MAX_ALTERNATIVES} alternatives.", "swipeCount",
                                {"swipeCount": message.swipe_count, "maxSwipes": MAX_ALTERNATIVES})

    def regenerate(self, principal: Principal, session_id: str, message_id: str, sampling: Sampling) -> Regenerated:
        """A new reply for the last turn, chosen; a reply's earlier alternatives are kept. For a last
        message from the user (left without a reply), its first reply."""
        speaking = self.sessions.speaking(principal, session_id)
        session = speaking.session
        last = self._message(session, message_id)
        self._last(session, last)
        self._alternatives_left(last)
        again = last.role == "assistant"
        earlier = self._repo.history(session.id, HISTORY_MESSAGES, last.ordinal if again else None)
        conversation = [Message(m.role, m.content) for m in earlier]
        reply = drain(self.sessions.reply(principal, speaking, conversation, sampling))
        now = self.sessions.clock()
        session = self.sessions.account(principal, session.id, reply, messages=0 if again else 1, now=now)
        replied_to = self._message(session, earlier[-1].id) if earlier else None
        if not again:
            row = self.sessions.reply_row(principal, session.id, session.message_count + session.removed_messages,
                                          now, reply)
            return Regenerated(session, replied_to, self._repo.add_messages(row)[0])
        added = self._repo.add_alternative(self.sessions.reply_row(principal, session.id, last.ordinal, now, reply))
        return Regenerated(session, replied_to, added)

    def choose(self, principal: Principal, session_id: str, message_id: str, position: int) -> MessageRecord:
        """Choose the alternative at `position` of the last turn."""
        session = self._active(principal, session_id)
        message = self._message(session, message_id)
        self._last(session, message)
        if position >= message.swipe_count:
            raise ValidationFailed([Violation("swipeIndex", "maximum", position, {"maximum": message.swipe_count - 1})])
        chosen = self._repo.select_alternative(session.id, message.ordinal, position)
        if chosen is None:  # an alternative removed meanwhile
            raise NotFound("chat message")
        return chosen

    def edit(self, principal: Principal, session_id: str, message_id: str, content: str) -> Change:
        """Replace a message's text (it becomes its turn's only alternative) and remove the later messages."""
        session = self._active(principal, session_id)
        message = self._message(session, message_id)
        now = self.sessions.clock()
        self._repo.edit(session.id, message.id, content, now)
        return self._removed(principal, session, message.ordinal + 1, self._message(session, message.id))

    def delete(self, principal: Principal, session_id: str, message_id: str) -> Change:
        """Remove a message (its whole turn) and the later messages."""
        session = self._active(principal, session_id)
        return self._removed(principal, session, self._message(session, message_id).ordinal, None)

    def _removed(self, principal: Principal, session: SessionRecord, from_ordinal: int,
                 message: MessageRecord | None) -> Change:
        removed = self._repo.remove_from(session.id, from_ordinal, self.sessions.clock())
        after = self._repo.uncount(session.id, removed)
        if after is None:
            raise self.sessions.conflict(self.sessions.get(principal, session.id), "The session ended meanwhile.")
        return Change(after, message, removed)

    def preview(self, principal: Principal, session_id: str, content: str, sampling: Sampling, model: str,
                limits: Limits) -> Preview:
        """What sending `content` would use: its tokens (input counted on what would be sent, output
        the session's mean reply, at most `max_tokens`), their cost, and the limits drawn from."""
        speaking = self.sessions.speaking(principal, session_id, lock=False)
        sent = [*PersonaReplies.voice_messages(speaking.voice), *self.sessions.conversation(speaking.session.id),
                Message("user", content)]
        stats = self._repo.reply_stats(speaking.session.id)
        output = stats[1] if stats is not None else DEFAULT_REPLY_TOKENS
        if sampling.max_tokens is not None:
            output = min(output, sampling.max_tokens)
        input_tokens = sum(message_tokens(m) for m in sent)
        cap, window = limits.cap("chat.messages")
        quota = (
            QuotaUse("chat.messages", 1, cap, window),
            QuotaUse("requests_per_minute", 1, limits.requests_per_minute, 60),
            QuotaUse("requests_per_day", 1, limits.requests_per_day, 86_400),
            QuotaUse("generations_per_month", 0, limits.generations_per_month, 0),
        )
        cost = self.sessions.prices.cost_micros(model, input_tokens, output)
        return Preview(model, input_tokens, output, cost, quota, unpriced=not self.sessions.prices.priced(model))
