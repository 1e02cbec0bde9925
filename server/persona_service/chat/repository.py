from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TypeAlias, TypeVarTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal,
    literal_column,
    select,
    text,
    true,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.sql import Select

from persona_service.chat.records import (
    MessageRecord,
    NewMessage,
    NewSession,
    SessionChanges,
    SessionFilters,
    SessionRecord,
)
from persona_service.chat.tables import ChatMessage, ChatSession
from persona_service.kernel.api import (
    Batches,
    NotFound,
    Prepared,
    Work,
    changed_columns,
    declare_aggregate,
    export_batches,
    read_cache,
    record,
    record_or_none,
    records,
    row_columns,
    stale,
    table_of,
)

Ts = TypeVarTuple("Ts")
# A read of a table's columns and more, its rows read by name (as records): their values typed by the records.
Columns: TypeAlias = "Select[*tuple[object, ...]]"
_sessions = table_of(ChatSession)
# GET by id is a hot read: prepared once, run without SQLAlchemy's per-execution layers.
_get = Prepared(
    select(_sessions).where(_sessions.c.id == bindparam("id"), _sessions.c.workspace_id == bindparam("ws")),
    SessionRecord,
)
# Every write's lock of its session (`lock`: lock_root's SELECT … FOR UPDATE of the aggregate's root, the same SQL),
# prepared as well (issue 50: a chat reply's first statement after the caller's hold).
_lock = Prepared(
    select(_sessions)
    .where(_sessions.c.id == bindparam("id"), _sessions.c.workspace_id == bindparam("ws"))
    .with_for_update(),
    SessionRecord,
)
# ... and kept in memory (kernel.data.read_cache): every write of a session's row below marks it.
CACHE = "chat_session"
_cached = read_cache(CACHE, SessionRecord)
# An exchange's accounting (`account`: every chat reply's), prepared too: one UPDATE … RETURNING the row.
_accounting = (
    update(_sessions)
    .where(_sessions.c.id == bindparam("id"), _sessions.c.status == literal_column("'active'"))
    .values({column: column + bindparam(name, type_=column.type) for name, column in (
        ("messages", _sessions.c.message_count), ("input_tokens", _sessions.c.input_tokens),
        ("output_tokens", _sessions.c.output_tokens), ("cost_usd_micros", _sessions.c.cost_usd_micros),
        ("unpriced", _sessions.c.unpriced_replies))})
    .values(last_active_at=func.greatest(_sessions.c.last_active_at,
                                         bindparam("now", type_=_sessions.c.last_active_at.type)))
    .returning(_sessions)
)
_account = Prepared(_accounting, SessionRecord)
_messages = table_of(ChatMessage)
# An exchange's two messages (`add_messages`: every chat reply's), one INSERT … RETURNING compiled once, named by
# their session's start (its partition); issue 50: built per call through Core it was 12% of the servers' time.
_MESSAGE_COLUMNS = (*(f.name for f in fields(NewMessage)), "session_started_at")
_add_two = Prepared(
    insert(_messages)
    .values([{name: bindparam(f"{name}_{i}", type_=_messages.c[name].type) for name in _MESSAGE_COLUMNS}
             for i in range(2)])
    .returning(_messages, literal_column("1").label("swipe_count"), literal_column("0").label("swipe_index")),
    MessageRecord,
)
# A new message and its reply with the exchange's accounting, in one statement (`account_exchange`: every chat
# reply's; issue 50: a round trip fewer than `_account` then `_add_two`): the accounting's UPDATE … RETURNING a CTE,
# the two messages inserted from its row (their ordinals the ones it claims, their partition its start), and the
# session's and the messages' rows read back together, the messages in order. No row: the session is not active
# (nothing inserted). The values are cast to their columns' types (an INSERT … SELECT types its own values).
_accounted = _accounting.cte("accounted")
_EXCHANGE_COLUMNS = tuple(f.name for f in fields(NewMessage) if f.name != "ordinal")


def _exchange_message(i: int) -> Columns:
    """The exchange's `i`th message (0: the user's, 1: the reply) as the INSERT's SELECT gives it."""
    return select(*[cast(bindparam(f"{name}_{i}"), _messages.c[name].type)
                    for name in _EXCHANGE_COLUMNS],
                  _accounted.c.message_count + _accounted.c.removed_messages + literal_column(str(i - 1)),
                  _accounted.c.started_at)


_added = insert(_messages).from_select([*_EXCHANGE_COLUMNS, "ordinal", "session_started_at"],
                                       union_all(_exchange_message(0), _exchange_message(1))) \
    .returning(_messages).cte("added")
# Each row: the session's columns (SessionRecord's), then one message's (MessageRecord's, its swipes none but its
# own), each in its record's fields' order (`Prepared.pairs` cuts them by position).
_exchange = Prepared(
    select(*[_accounted.c[f.name] for f in fields(SessionRecord)],
           *[(literal_column("1") if f.name == "swipe_count" else literal_column("0") if f.name == "swipe_index"
              else _added.c[f.name]).label("message_" + f.name) for f in fields(MessageRecord)])
    .select_from(_accounted.join(_added, true()))
    .order_by(_added.c.ordinal),
    SessionRecord,
)
# A session with its messages and their alternatives: every write of a session locks its row first
# (`ChatSessionRepository.lock`), so two writes at once (two tabs, a double click) run one after the other.
SESSION = declare_aggregate("chat_session", _sessions, _messages)
# What a conversation is made of: each turn's chosen alternative, removed messages left out.
_visible = and_(_messages.c.selected, _messages.c.deleted_at.is_(None))


@dataclass(frozen=True, slots=True)
class Turn:
    """A message as the model is sent it."""

    role: str
    content: str


# The history a new message sends (`history_texts` where its session's start is known: every send's), prepared.
_history = Prepared(
    select(_messages.c.role, _messages.c.content)
    .where(_messages.c.session_id == bindparam("id"), _messages.c.session_started_at == bindparam("start"),
           _visible, _messages.c.ordinal < bindparam("before"))
    .order_by(_messages.c.ordinal.desc()).limit(bindparam("n")),
    Turn,
)
_NO_ORDINAL = 2**31 - 1  # above every ordinal (an INTEGER column): the whole conversation
_alternatives = _messages.alias("alternatives")


EXPIRE_BATCH = 500  # sessions a retention batch deletes, in a transaction of its own (a few ms each)


@contextmanager
def _kept_month() -> Iterator[None]:
    """A message inserted into a session whose month the retention is retiring finds no partition (detached;
    its session's row goes in the batches after, seconds later): the session is gone, as it is after."""
    try:
        yield
    except Exception as exc:
        cause = getattr(exc, "orig", exc)
        if getattr(cause, "sqlstate", "") == "23514" and "no partition of relation" in str(cause):
            raise NotFound("chat session") from exc
        raise


def _started(session_id: str | ColumnElement[str]) -> ColumnElement[datetime]:
    """The session's `started_at`, read by the statement itself (a subquery: a read is pruned as it runs)."""
    return select(_sessions.c.started_at).where(_sessions.c.id == session_id).scalar_subquery()


def _last_visible(stmt: Select[*Ts], session: Sequence[ColumnElement[bool]], limit: int,
                  before_ordinal: int | None) -> Select[*Ts]:
    """`stmt` over the conversation's last `limit` visible messages (before `before_ordinal`), newest first."""
    stmt = stmt.where(*session, _visible)
    if before_ordinal is not None:
        stmt = stmt.where(_messages.c.ordinal < before_ordinal)
    return stmt.order_by(_messages.c.ordinal.desc()).limit(limit)


def _with_swipes(start: datetime | ColumnElement[datetime], *where: ColumnElement[bool]) -> Columns:
    """The messages `where` says, each with how many alternatives its turn keeps and its position among them
    (ChatMessage.swipeCount, swipeIndex), read in the partition of `start` (the session's start)."""
    same_turn = (_alternatives.c.session_id == _messages.c.session_id, _alternatives.c.ordinal == _messages.c.ordinal,
                 _alternatives.c.session_started_at == start, _alternatives.c.deleted_at.is_(None))
    swipe_count = select(func.count()).where(*same_turn).scalar_subquery().label("swipe_count")
    swipe_index = select(func.count()).where(*same_turn, _alternatives.c.swipe < _messages.c.swipe) \
        .scalar_subquery().label("swipe_index")
    return select(_messages, swipe_count, swipe_index).where(*where)


class ChatSessionRepository:
    def __init__(self, conn: Connection):
        self._conn = conn
        # The start of each session a row read here names: its messages' partition key (migration 0035), which
        # never changes; a message is written with it and a read names it, so PostgreSQL reads one partition.
        self.starts: dict[str, datetime] = {}

    def _seen(self, row: SessionRecord | None) -> SessionRecord | None:
        if row is not None:
            self.starts[row.id] = row.started_at
        return row

    def _start(self, session_id: str) -> datetime | ColumnElement[datetime]:
        """The session's start: known from its row, else read by the statement that needs it."""
        known = self.starts.get(session_id)
        return known if known is not None else _started(session_id)

    def _of_session(self, session_id: str) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
        """The session's messages, in its partition alone."""
        return _messages.c.session_id == session_id, _messages.c.session_started_at == self._start(session_id)

    def _swipes_of(self, session_id: str, *where: ColumnElement[bool]) -> Columns:
        """`_with_swipes` of the session's messages: a turn's alternatives are read in its partition alone, named
        as a value where it is known (no partition to prune as each turn is counted), else the message's own."""
        return _with_swipes(self.starts.get(session_id, _messages.c.session_started_at), *self._of_session(session_id),
                            *where)

    # --- sessions -----------------------------------------------------------------

    def get(self, workspace_id: str, session_id: str) -> SessionRecord | None:
        return self._seen(_get.first(self._conn, {"id": session_id, "ws": workspace_id}))

    @staticmethod
    def remembered(workspace_id: str, session_id: str, work: Work) -> SessionRecord | None:
        """`get` for a read on its own: from memory when this process holds the row (no connection taken),
        else from the database (the unit of work's connection, opened only then), kept for the next read."""
        return _cached.read(session_id, workspace_id,
                            lambda: work.of(ChatSessionRepository).get(workspace_id, session_id))

    def _changed(self, row: SessionRecord | None) -> SessionRecord | None:
        """`row` as a write left it: what memory holds of it goes once the write commits."""
        if row is not None:
            stale(self._conn, CACHE, row.id)
        return self._seen(row)

    def lock(self, workspace_id: str, session_id: str) -> SessionRecord | None:
        """The session, its row locked until the unit of work ends: what a write decides on is read after this."""
        return self._seen(_lock.first(self._conn, {"id": session_id, "ws": workspace_id}))

    def create(self, new: NewSession) -> SessionRecord:
        stmt = insert(_sessions).values(**row_columns(new)).returning(_sessions)
        created = record(SessionRecord, self._conn.execute(stmt).mappings().one())
        self._seen(created)
        return created

    def list_page(
        self, workspace_id: str, filters: SessionFilters, limit: int, after: tuple[datetime, str] | None
    ) -> list[SessionRecord]:
        stmt = select(_sessions).where(_sessions.c.workspace_id == workspace_id)
        for column, value in ((_sessions.c.persona_id, filters.persona_id), (_sessions.c.status, filters.status),
                              (_sessions.c.user_id, filters.user_id)):
            if value:
                stmt = stmt.where(column == value)
        if after is not None:
            stmt = stmt.where(tuple_(_sessions.c.started_at, _sessions.c.id) < tuple_(*after))
        stmt = stmt.order_by(_sessions.c.started_at.desc(), _sessions.c.id.desc()).limit(limit)
        return records(SessionRecord, self._conn.execute(stmt).mappings())

    def transition(self, session_id: str, from_statuses: tuple[str, ...],
                   changes: SessionChanges) -> SessionRecord | None:
        """Change a session's status only from one of `from_statuses`
        (atomic); None when it was in another status."""
        stmt = (
            update(_sessions)
            .where(_sessions.c.id == session_id, _sessions.c.status.in_(from_statuses))
            .values(**changed_columns(changes))
            .returning(_sessions)
        )
        return self._changed(record_or_none(SessionRecord, self._conn.execute(stmt).mappings().first()))

    def uncount(self, session_id: str, removed: int) -> SessionRecord | None:
        """Take `removed` messages off an active session's count (atomic; their ordinals stay claimed).
        None when the session is no longer active."""
        stmt = (
            update(_sessions)
            .where(_sessions.c.id == session_id, _sessions.c.status == "active")
            .values(message_count=_sessions.c.message_count - removed,
                    removed_messages=_sessions.c.removed_messages + removed)
            .returning(_sessions)
        )
        return self._changed(record_or_none(SessionRecord, self._conn.execute(stmt).mappings().first()))

    def account(self, session_id: str, *, messages: int, input_tokens: int, output_tokens: int, cost_usd_micros: int,
                now: datetime, unpriced: int = 0) -> SessionRecord | None:
        """Add an exchange to an active session's counters in one atomic
        UPDATE … RETURNING (concurrent exchanges never lose counts; the row
        lock orders them). None when the session is no longer active."""
        return self._changed(_account.first(self._conn, {
            "id": session_id, "messages": messages, "input_tokens": input_tokens, "output_tokens": output_tokens,
            "cost_usd_micros": cost_usd_micros, "unpriced": unpriced, "now": now}))

    @_kept_month()
    def account_exchange(self, user: NewMessage, reply: NewMessage, *, input_tokens: int, output_tokens: int,
                         cost_usd_micros: int, now: datetime, unpriced: int = 0
                         ) -> tuple[SessionRecord, MessageRecord, MessageRecord] | None:
        """`account` of an exchange (two messages) and `add_messages` of its two, in one statement (`_exchange`):
        their ordinals are the two the accounting claims (theirs are ignored). None when the session is no longer
        active (nothing stored)."""
        params: dict[str, object] = {"id": user.session_id, "messages": 2, "input_tokens": input_tokens,
                                  "output_tokens": output_tokens, "cost_usd_micros": cost_usd_micros,
                                  "unpriced": unpriced, "now": now}
        for i, message in enumerate((user, reply)):
            params.update({f"{name}_{i}": value for name, value in row_columns(message).items() if name != "ordinal"})
        rows = _exchange.pairs(self._conn, params, MessageRecord)
        if not rows:
            return None
        session = self._changed(rows[0][0])
        assert session is not None and len(rows) == 2
        (_, first), (_, second) = rows
        return session, first, second

    def completions_session(self, workspace_id: str, persona_id: str, user_id: str, title: str) -> SessionRecord | None:
        """The active session of (persona, user) with this title, locked for
        the transaction; None when there is none (a first use: `first_use`)."""
        stmt = select(_sessions).where(
            _sessions.c.workspace_id == workspace_id, _sessions.c.persona_id == persona_id,
            _sessions.c.user_id == user_id, _sessions.c.title == title, _sessions.c.status == "active",
        ).order_by(_sessions.c.started_at).limit(1).with_for_update()
        return self._seen(record_or_none(SessionRecord, self._conn.execute(stmt).mappings().first()))

    def first_use(self, workspace_id: str, persona_id: str, user_id: str, title: str) -> None:
        """Hold (persona, user, title) by name until the transaction ends, so that concurrent first uses create
        one session: the second waits, then finds the first's (`completions_session` again). A lock by name
        comes last in the lock order: after the session's lookup and the persona's hold."""
        self._conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
                          {"k": f"{workspace_id}/{persona_id}/{user_id}/{title}"})

    # --- messages -------------------------------------------------------------------

    @_kept_month()
    def add_messages(self, *new: NewMessage) -> list[MessageRecord]:
        """Messages in one statement (an exchange's two: one round trip, not two), in the order given (each
        with its session's start: one statement a message where no session row read here names it). An
        exchange whose session was read here, every reply's, runs prepared."""
        if len(new) == 2 and all(m.session_id in self.starts for m in new):
            params = {f"{name}_{i}": value for i, m in enumerate(new)
                      for name, value in {**row_columns(m), "session_started_at": self.starts[m.session_id]}.items()}
            added = {row.id: row for row in _add_two.all(self._conn, params)}
            return [added[m.id] for m in new]
        stmt = insert(_messages).returning(_messages, literal(1).label("swipe_count"), literal(0).label("swipe_index"),
                                           sort_by_parameter_order=True)
        if all(m.session_id in self.starts for m in new):
            rows = [{**row_columns(m), "session_started_at": self.starts[m.session_id]} for m in new]
        else:
            stmt = stmt.values(session_started_at=_started(bindparam("session_of")))
            rows = [{**row_columns(m), "session_of": m.session_id} for m in new]
        return records(MessageRecord, self._conn.execute(stmt, rows).mappings())

    @_kept_month()
    def add_alternative(self, new: NewMessage) -> MessageRecord:
        """A new alternative of its turn (swipe = the next index), chosen: the others are unchosen."""
        turn = (*self._of_session(new.session_id), _messages.c.ordinal == new.ordinal)
        self._conn.execute(update(_messages).where(*turn).values(selected=False))
        count = select(func.count()).where(*turn).scalar_subquery()
        self._conn.execute(insert(_messages).values(swipe=count, selected=True,
                                                   session_started_at=self._start(new.session_id), **row_columns(new)))
        added = self.message(new.session_id, new.id)
        assert added is not None
        return added

    def history(self, session_id: str, limit: int, before_ordinal: int | None = None) -> list[MessageRecord]:
        """The last `limit` messages of the conversation (before `before_ordinal`), oldest first, for their
        text: their alternatives are not counted (the hot path of every send), each reads as its turn's only."""
        stmt = _last_visible(select(_messages, literal(1).label("swipe_count"), literal(0).label("swipe_index")),
                             self._of_session(session_id), limit, before_ordinal)
        return list(reversed(records(MessageRecord, self._conn.execute(stmt).mappings())))

    def history_texts(self, session_id: str, limit: int, before_ordinal: int | None = None) -> list[tuple[str, str]]:
        """`history`'s (role, content) alone, oldest first: what a new message sends the model (no records made
        of columns it does not send)."""
        start = self.starts.get(session_id)
        if start is not None:  # (a send's: its session locked here first)
            turns = _history.all(self._conn, {"id": session_id, "start": start, "n": limit,
                                             "before": _NO_ORDINAL if before_ordinal is None else before_ordinal})
            return [(turn.role, turn.content) for turn in reversed(turns)]
        stmt = _last_visible(select(_messages.c.role, _messages.c.content), self._of_session(session_id), limit,
                             before_ordinal)
        return [(role, content) for role, content in reversed(self._conn.execute(stmt).all())]

    def messages_page(self, session_id: str, limit: int, after_ordinal: int) -> list[MessageRecord]:
        stmt = self._swipes_of(session_id, _visible, _messages.c.ordinal > after_ordinal)
        return records(MessageRecord, self._conn.execute(stmt.order_by(_messages.c.ordinal).limit(limit)).mappings())

    def message(self, session_id: str, message_id: str) -> MessageRecord | None:
        """A message of the session that is not removed (any alternative of its turn)."""
        stmt = self._swipes_of(session_id, _messages.c.id == message_id, _messages.c.deleted_at.is_(None))
        return record_or_none(MessageRecord, self._conn.execute(stmt).mappings().first())

    def last_ordinal(self, session_id: str) -> int | None:
        """The ordinal of the conversation's last message; None when it has none."""
        stmt = select(func.max(_messages.c.ordinal)).where(*self._of_session(session_id), _visible)
        return self._conn.execute(stmt).scalar()

    def select_alternative(self, session_id: str, ordinal: int, position: int) -> MessageRecord | None:
        """Choose the turn's alternative at `position` (swipeIndex); None when it has no such alternative."""
        turn = (*self._of_session(session_id), _messages.c.ordinal == ordinal, _messages.c.deleted_at.is_(None))
        chosen = self._conn.execute(
            select(_messages.c.id).where(*turn).order_by(_messages.c.swipe).offset(position).limit(1)).scalar()
        if chosen is None:
            return None
        self._conn.execute(update(_messages).where(*turn).values(selected=_messages.c.id == chosen))
        return self.message(session_id, chosen)

    def edit(self, session_id: str, message_id: str, content: str, now: datetime) -> None:
        """Replace a message's text, chosen; its turn's other alternatives are removed. Both updates name the
        session's start (known from its row, locked first), so each reads the session's partition alone."""
        ordinal = self._conn.execute(update(_messages).where(*self._of_session(session_id), _messages.c.id == message_id)
                                    .values(content=content, edited=True, selected=True)
                                    .returning(_messages.c.ordinal)).scalar()
        if ordinal is None:
            return
        self._conn.execute(
            update(_messages)
            .where(*self._of_session(session_id), _messages.c.ordinal == ordinal,
                   _messages.c.id != message_id, _messages.c.deleted_at.is_(None))
            .values(deleted_at=now, content="")
        )

    def remove_from(self, session_id: str, ordinal: int, now: datetime) -> int:
        """Remove the messages from `ordinal` on (every alternative; text erased, usage kept); the
        number of conversation messages removed (a turn's alternatives count once)."""
        stmt = (
            update(_messages)
            .where(*self._of_session(session_id), _messages.c.ordinal >= ordinal, _messages.c.deleted_at.is_(None))
            .values(deleted_at=now, content="")
            .returning(_messages.c.selected)
        )
        return sum(1 for selected in self._conn.execute(stmt).scalars() if selected)

    def reply_stats(self, session_id: str) -> tuple[str, int] | None:
        """(model of the last reply, mean output tokens of the replies) of a session; None without replies."""
        replies = (*self._of_session(session_id), _messages.c.role == "assistant")
        last = select(_messages.c.model).where(*replies).order_by(_messages.c.ordinal.desc(), _messages.c.swipe.desc())
        mean = select(func.avg(_messages.c.output_tokens)).where(*replies)
        model = self._conn.execute(last.limit(1)).scalar()
        return None if model is None else (model, round(self._conn.execute(mean).scalar() or 0))

    def personal_data(self, org_id: str, user_ids: list[str]) -> dict[str, Batches]:
        """The chat sessions whose `userId` is one of the user's (`completions.users_of`), and their messages
        (a join, not a list of the sessions' ids: a heavy user has thousands)."""
        theirs = (_sessions.c.org_id == org_id, _sessions.c.user_id.in_(user_ids))
        sessions = select(_sessions).where(*theirs).order_by(_sessions.c.started_at)
        messages = select(_messages).join(_sessions, and_(_sessions.c.id == _messages.c.session_id,
                                                          _sessions.c.started_at == _messages.c.session_started_at)) \
            .where(*theirs) \
            .order_by(_messages.c.session_id, _messages.c.ordinal)
        return {"chat_sessions": export_batches(self._conn, sessions), "chat_messages": export_batches(self._conn, messages)}

    def expire(self, before: datetime, after: str = "", limit: int = EXPIRE_BATCH, wait: bool = False) -> list[str]:
        """At most `limit` of the sessions started before `before` deleted, the next by id after `after` (the
        retention's, once their messages' partitions are dropped: their messages' cascade names those months,
        pruned to nothing); their ids, in order. By id, a round's batches walk the key once between them, where
        each would scan the table past the rows the ones before deleted. A session a write holds is skipped
        (SKIP LOCKED: the pass never waits on a conversation) unless `wait` (the round's last pass, for those)."""
        doomed = select(_sessions.c.id).where(_sessions.c.started_at < before, _sessions.c.id > after) \
            .order_by(_sessions.c.id).limit(limit).with_for_update(skip_locked=not wait).scalar_subquery()
        expired = sorted(self._conn.execute(delete(_sessions).where(_sessions.c.id.in_(doomed))
                                           .returning(_sessions.c.id)).scalars())
        stale(self._conn, CACHE, *expired)
        return expired

    def erase(self, org_id: str, user_ids: list[str]) -> dict[str, int]:
        """The sessions whose `userId` is one of the user's (`completions.users_of`), with their messages."""
        stmt = delete(_sessions).where(_sessions.c.org_id == org_id, _sessions.c.user_id.in_(user_ids)) \
            .returning(_sessions.c.id)
        erased = list(self._conn.execute(stmt).scalars())
        stale(self._conn, CACHE, *erased)
        return {"chat_sessions_deleted": len(erased)}
