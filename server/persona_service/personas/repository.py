from __future__ import annotations

import re
from dataclasses import fields
from datetime import datetime
from typing import TypeVarTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    CursorResult,
    Select,
    TextClause,
    Update,
    bindparam,
    delete,
    false,
    func,
    insert,
    literal_column,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert

from persona_service.kernel.api import (
    DECIDES_NOTHING,
    Batches,
    Prepared,
    PreparedRows,
    PreparedWrite,
    changed_columns,
    declare_aggregate,
    export_batches,
    lock_root,
    record,
    record_or_none,
    records,
    row_columns,
    table_of,
)
from persona_service.personas.json_support import as_object
from persona_service.personas.records import (
    NewPersona,
    NewStep,
    NewVersion,
    PersonaChanges,
    PersonaFilters,
    PersonaRecord,
    PersonaRow,
    PersonaSummary,
    SortKey,
    SortOrder,
    StepRecord,
    VersionRecord,
    VersionRow,
    VoiceRecord,
    VoiceRow,
)
from persona_service.personas.step_records import Dialogue, Soul, StepOutputs, encode
from persona_service.personas.tables import SLUG_CONSTRAINT as SLUG_CONSTRAINT  # the service's derivation names it
from persona_service.personas.tables import (
    GenerationRun,
    GenerationStep,
    Persona,
    PersonaVersion,
    VoiceProfile,
)

Ts = TypeVarTuple("Ts")

_personas = table_of(Persona)
_versions = table_of(PersonaVersion)
_voices = table_of(VoiceProfile)
_runs = table_of(GenerationRun)
_steps = table_of(GenerationStep)
_run_insert = PreparedRows(_runs, ("id", "org_id", "workspace_id", "persona_id", "kind", "status", "from_step",
                                   "started_at", "finished_at", "error_code"))
_steps_insert = PreparedRows(_steps, tuple(f.name for f in fields(NewStep)))

# A persona with its versions and its current voice: every write of a persona locks its row first
# (kernel.data.aggregates), then reads the version and state it decides on; a write of another aggregate
# that only needs the persona to exist and stay as it read it (a chat session, a portrait, a listing, a
# fork's source) holds it FOR SHARE. Generation runs and their steps are not members: a run is written by
# the run itself (a create's before its persona exists) and is read back only once finished (immutable).
PERSONA = declare_aggregate("persona", _personas, _versions, _voices)
# A chat reply's reads of its persona and voice (issue 50): prepared once, run without SQLAlchemy's per-execution
# layers (kernel.data.prepared); the same rows and records as `active` and `voice` read through Core.
_active_read = Prepared(select(_personas).where(
    _personas.c.id == bindparam("id"), _personas.c.workspace_id == bindparam("ws"),
    _personas.c.state != literal_column("'deleted'")), PersonaRow)
_voice_read = Prepared(select(_voices).where(_voices.c.persona_id == bindparam("id")), VoiceRow)
# ... both in one: the current voice of a persona `_active_read` finds (a chat reply needs no more of the persona).
_active_voice_read = Prepared(select(_voices).join_from(_voices, _personas, _personas.c.id == _voices.c.persona_id).where(
    _voices.c.persona_id == bindparam("id"), _personas.c.workspace_id == bindparam("ws"),
    _personas.c.state != literal_column("'deleted'")), VoiceRow)
# ... and its hold on the persona as it stores the reply (FOR SHARE; three narrow columns, no soul or metadata).
_hold_read = Prepared(select(_personas.c.id, _personas.c.org_id, _personas.c.created_at).where(
    _personas.c.id == bindparam("id"), _personas.c.workspace_id == bindparam("ws"),
    _personas.c.state != literal_column("'deleted'")).with_for_update(read=True), PersonaSummary)
# A creation's row (its slug derived: nothing when the workspace holds it) and every new version with its voice
# (the voice's upsert a CTE of the version's INSERT), compiled once and prepared (issue 50): the same rows as Core's.
def _names(record: type) -> list[str]:
    return [f.name for f in fields(record)]


_insert_unless_taken = PreparedWrite(
    pg_insert(_personas).values({name: bindparam(name) for name in _names(NewPersona)})
    .on_conflict_do_nothing(constraint=SLUG_CONSTRAINT).returning(_personas), PersonaRow)
_VOICE = "voice_"  # the voice's parameters' prefix (a version has columns of the same names)
_voice_upsert = pg_insert(_voices).values({name: bindparam(_VOICE + name) for name in _names(VoiceRecord)})
_voice_upsert = _voice_upsert.on_conflict_do_update(
    index_elements=[_voices.c.persona_id], set_={name: _voice_upsert.excluded[name] for name in _names(VoiceRecord)})
_add_version: PreparedWrite[None] = PreparedWrite(
    insert(_versions).values({name: bindparam(name) for name in _names(NewVersion)})
    .add_cte(_voice_upsert.cte("voice")))

# Punctuation and symbols (`/`, `.`, `@`, `-`, `_`, …): each run of them is a space in the search document,
# so that they separate words there as they do in `q` (split by WORD: runs of letters and digits). PostgreSQL's
# text-search parser alone keeps hosts, e-mails, paths, file names and signed integers whole (`painter/poet`,
# `jane@pebble.org`, the `-007` of `agent-007`), and a `q` word never matched a part of one (issue 48).
# `[[:punct:]]` holds no letter in any locale; `[^[:alnum:]]` would, in a C-locale database, take every
# non-ASCII letter for a separator.
PUNCTUATION = "[[:punct:]]+"
WORD = re.compile(r"[^\W_]+")
# The search document, exactly as migration 0030's GIN index spells it (the planner uses the index only then).
SEARCH_DOCUMENT = ("to_tsvector('simple'::regconfig, regexp_replace(personas.display_name || ' ' || personas.slug "
                   f"|| ' ' || personas.intent, '{PUNCTUATION}', ' ', 'g'))")
# The list's sort keys: the expressions migration 0021's (and 0001's) indexes are built on.
SORT_KEYS: dict[str, ColumnElement[datetime] | ColumnElement[str]] = {
    "created_at": _personas.c.created_at,
    "updated_at": _personas.c.updated_at,
    "display_name": func.lower(_personas.c.display_name),
}


def search_condition(q: str) -> ColumnElement[bool] | TextClause:
    """Every word of `q` (a run of letters and digits) starts a word of the search document; no word: nothing
    matches. `agent-007` is `agent:* & 007:*`, as the document holds the slug `agent-007` as `agent` and `007`."""
    words = WORD.findall(q.lower())
    if not words:
        return false()
    query = " & ".join(f"{w}:*" for w in words)
    return text(f"{SEARCH_DOCUMENT} @@ to_tsquery('simple', :persona_search)").bindparams(persona_search=query)


def _persona_columns(values: dict[str, object]) -> dict[str, object]:
    """A `NewPersona`'s or a `PersonaChanges`' values as the row's: the soul as the JSON its column holds (the
    keys `Soul.to_json` writes, the ones every persona row has held)."""
    soul = values.get("soul")
    return {**values, "soul": soul.to_json()} if isinstance(soul, Soul) else values


def _active(workspace_id: str, persona_id: str) -> tuple[ColumnElement[bool], ...]:
    """The persona, in the workspace and not deleted."""
    return _personas.c.id == persona_id, _personas.c.workspace_id == workspace_id, _personas.c.state != "deleted"


class PersonaRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    # --- personas -------------------------------------------------------------

    def get(self, workspace_id: str, persona_id: str, *, for_update: bool = False,
            decides_nothing: bool = False) -> PersonaRecord | None:
        """The persona; `for_update`: locked (`lock_root`: every write of a persona starts there);
        `decides_nothing`: an unlocked read in a writing transaction whose caller decides again under the lock."""
        where = (_personas.c.id == persona_id, _personas.c.workspace_id == workspace_id)
        if for_update:
            found = lock_root(self._conn, PERSONA, PersonaRow, *where)
        else:
            stmt = select(_personas).where(*where)
            found = record_or_none(PersonaRow, self._read(stmt, decides_nothing).mappings().first())
        return None if found is None else found.record()

    def _read(self, stmt: Select[*Ts], decides_nothing: bool) -> CursorResult[*Ts]:
        if decides_nothing:
            stmt = stmt.execution_options(**{DECIDES_NOTHING: True})
        return self._conn.execute(stmt)

    def insert(self, persona: NewPersona) -> PersonaRecord:
        stmt = insert(_personas).values(**_persona_columns(row_columns(persona))).returning(_personas)
        return record(PersonaRow, self._conn.execute(stmt).mappings().one()).record()

    def insert_unless_slug_taken(self, persona: NewPersona) -> PersonaRecord | None:
        """The persona, or None when its workspace holds its slug (kernel.data.unique.derive_unique)."""
        made = _insert_unless_taken.run(self._conn, _persona_columns(row_columns(persona)))
        return made[0].record() if made else None

    def update(self, persona_id: str, changes: PersonaChanges) -> PersonaRecord:
        values = _persona_columns(changed_columns(changes))
        return self._updated(update(_personas).where(_personas.c.id == persona_id).values(**values))

    def restore(self, persona_id: str, state: str, at: datetime) -> PersonaRecord:
        """Back to `state` from a soft delete: the deletion's columns cleared."""
        return self._updated(update(_personas).where(_personas.c.id == persona_id).values(
            state=state, state_before_delete=None, deleted_at=None, purge_at=None, updated_at=at))

    def _updated(self, stmt: Update) -> PersonaRecord:
        return record(PersonaRow, self._conn.execute(stmt.returning(_personas)).mappings().one()).record()

    def slug_owner(self, workspace_id: str, slug: str) -> str | None:
        # A friendlier 409 (or a derived slug) before the insert; the unique index on (workspace, slug) decides
        # (kernel.data.unique answers a concurrent taker): this read decides nothing about any persona.
        stmt = select(_personas.c.id).where(_personas.c.workspace_id == workspace_id, _personas.c.slug == slug)
        holder: str | None = self._read(stmt, True).scalar()
        return holder

    def next_fork_ordinal(self, persona_id: str) -> int | None:
        """Atomically claim the next fork ordinal of a parent that is not deleted (None: it is, or is gone).
        The UPDATE locks the parent: it waits for a write holding it, then decides on what that left."""
        stmt = (
            update(_personas)
            .where(_personas.c.id == persona_id, _personas.c.state != "deleted")
            .values(fork_count=_personas.c.fork_count + 1)
            .returning(_personas.c.fork_count)
        )
        return self._conn.execute(stmt).scalar()

    def list_page(
        self, workspace_id: str, filters: PersonaFilters, limit: int, after: tuple[datetime | str, str] | None,
        order: SortOrder = SortOrder.parse(""), q: str = "",
    ) -> list[tuple[PersonaRecord, SortKey]]:
        """A page of the workspace's personas in `order` (ties by id), strictly
        after `after` = (sort key, id); each with its sort key (the cursor's)."""
        key = SORT_KEYS[order.column]
        stmt = select(_personas, key.label("sort_key")).where(_personas.c.workspace_id == workspace_id)
        if filters.state:
            stmt = stmt.where(_personas.c.state == filters.state)
        elif not filters.show_deleted:
            stmt = stmt.where(_personas.c.state != "deleted")
        if filters.visibility:
            stmt = stmt.where(_personas.c.visibility == filters.visibility)
        if filters.root_id:
            stmt = stmt.where(_personas.c.root_id == filters.root_id)
        if q:
            stmt = stmt.where(search_condition(q))
        if after is not None:
            position = tuple_(key, _personas.c.id)
            stmt = stmt.where(position < tuple_(*after) if order.descending else position > tuple_(*after))
        if order.descending:
            stmt = stmt.order_by(key.desc(), _personas.c.id.desc())
        else:
            stmt = stmt.order_by(key.asc(), _personas.c.id.asc())
        rows = self._conn.execute(stmt.limit(limit)).mappings().all()
        return [(row.record(), key) for row, key in zip(records(PersonaRow, rows), records(SortKey, rows))]

    def tree(self, workspace_id: str, root_id: str) -> list[PersonaRecord]:
        stmt = select(_personas).where(_personas.c.workspace_id == workspace_id, _personas.c.root_id == root_id)
        rows = self._conn.execute(stmt.order_by(_personas.c.created_at)).mappings()
        return [row.record() for row in records(PersonaRow, rows)]

    def purge_deleted(self, now: datetime, limit: int) -> list[str]:
        """Delete up to `limit` soft-deleted personas past their grace, the
        earliest due first (the purge_at index, so a batch reads about a
        batch), skipping rows another transaction holds; returns their ids."""
        due = select(_personas.c.id).where(_personas.c.state == "deleted", _personas.c.purge_at <= now) \
            .order_by(_personas.c.purge_at).limit(limit).with_for_update(skip_locked=True)
        stmt = delete(_personas).where(_personas.c.id.in_(due.scalar_subquery())).returning(_personas.c.id)
        return list(self._conn.execute(stmt).scalars())

    # --- versions and voice ---------------------------------------------------------

    def add_version(self, version: NewVersion, voice: VoiceRecord) -> None:
        """The persona's new version and its current voice (inserted or replaced), in one statement: the voice's
        upsert is a data-modifying CTE of the version's INSERT (one statement to build and run, not two)."""
        # (JSON columns: the soul, the voice, the sample dialogues as `to_json` writes them, as they always were)
        voice_columns = {**row_columns(voice), "sample_dialogues": Dialogue.to_json_list(voice.sample_dialogues)}
        _add_version.run(self._conn, {
            **row_columns(version), "soul": version.soul.to_json(), "voice": version.voice.to_json(),
            **{_VOICE + name: value for name, value in voice_columns.items()}})

    def version(self, persona_id: str, version: int, *, decides_nothing: bool = False) -> VersionRecord | None:
        stmt = select(_versions).where(_versions.c.persona_id == persona_id, _versions.c.version == version)
        found = record_or_none(VersionRow, self._read(stmt, decides_nothing).mappings().first())
        return None if found is None else found.record()

    def versions_page(self, persona_id: str, limit: int, before: int | None) -> list[VersionRecord]:
        """A persona's versions, newest first, older than `before` when given."""
        stmt = select(_versions).where(_versions.c.persona_id == persona_id)
        if before is not None:
            stmt = stmt.where(_versions.c.version < before)
        stmt = stmt.order_by(_versions.c.version.desc()).limit(limit)
        return [found.record() for found in records(VersionRow, self._conn.execute(stmt).mappings())]

    def versions(self, persona_ids: list[str]) -> list[VersionRecord]:
        stmt = select(_versions).where(_versions.c.persona_id.in_(persona_ids)).order_by(_versions.c.version)
        return [found.record() for found in records(VersionRow, self._conn.execute(stmt).mappings())]

    def voice(self, persona_id: str, *, decides_nothing: bool = False) -> VoiceRecord | None:
        found = _voice_read.first(self._conn, {"id": persona_id}, decides_nothing=decides_nothing)
        return None if found is None else found.record()

    def active_voice(self, workspace_id: str, persona_id: str, *, decides_nothing: bool = False) -> VoiceRecord | None:
        """`voice` of a persona `active` finds, in one read; None when it is not active in the workspace."""
        found = _active_voice_read.first(self._conn, {"id": persona_id, "ws": workspace_id},
                                         decides_nothing=decides_nothing)
        return None if found is None else found.record()

    # --- generation runs ------------------------------------------------------------

    def add_run(self, *, id: str, org_id: str, workspace_id: str, persona_id: str, kind: str, status: str,
                from_step: str, started_at: datetime, finished_at: datetime, error_code: str,
                steps: list[NewStep]) -> None:
        """A generation run as it ended (completed or failed) and its steps, written together as it ends (the
        same unit of work: nothing reads them before it commits). Two prepared statements, the run first (its
        steps refer to it): before, the run was inserted as it began and updated as it ended, and the steps'
        list of rows compiled again for every run (issue 50)."""
        _run_insert.run(self._conn, [{
            "id": id, "org_id": org_id, "workspace_id": workspace_id, "persona_id": persona_id, "kind": kind,
            "status": status, "from_step": from_step, "started_at": started_at, "finished_at": finished_at,
            "error_code": error_code,
        }])
        _steps_insert.run(self._conn, [
            {**row_columns(step), "output": {} if step.output is None else encode(step.output)} for step in steps])

    def step_outputs(self, run_id: str) -> StepOutputs:
        """A run's step outputs, each row's JSON read as its step's record."""
        stmt = select(_steps.c.step, _steps.c.output).where(_steps.c.run_id == run_id).order_by(_steps.c.ordinal)
        rows = records(StepRecord, self._conn.execute(stmt).mappings())
        return StepOutputs.from_json({s.step: as_object(s.output) for s in rows})

    # --- reads for other modules (through personas.directory) -----------------------------

    def in_writing_transaction(self) -> bool:
        """Whether the unit of work writes (a read-only one runs in autocommit: kernel.data.uow)."""
        driver = self._conn.connection.driver_connection
        return driver is not None and not getattr(driver, "autocommit", False)

    def active(self, workspace_id: str, persona_id: str, *, share: bool = False,
               decides_nothing: bool = False) -> PersonaRecord | None:
        """The persona if not deleted; `share`: held FOR SHARE until the transaction ends (a write of another
        aggregate that needs it to exist and stay as read: it blocks its writes, not its readers)."""
        if not share:
            found = _active_read.first(self._conn, {"id": persona_id, "ws": workspace_id}, decides_nothing=decides_nothing)
        else:
            stmt = select(_personas).where(*_active(workspace_id, persona_id)).with_for_update(read=True)
            found = record_or_none(PersonaRow, self._read(stmt, decides_nothing).mappings().first())
        return None if found is None else found.record()

    def hold(self, workspace_id: str, persona_id: str) -> bool:
        """`active(share=True) is not None` without reading the row (its soul and metadata go undecoded)."""
        return _hold_read.first(self._conn, {"id": persona_id, "ws": workspace_id}) is not None

    def not_deleted(self, persona_ids: list[str]) -> list[PersonaRecord]:
        """These personas that are not deleted, locked in id order (as `aggregates.lock_roots`: two such
        writes never wait on each other in a cycle)."""
        stmt = select(_personas).where(_personas.c.id.in_(persona_ids), _personas.c.state != "deleted") \
            .order_by(_personas.c.id).with_for_update()
        return [row.record() for row in records(PersonaRow, self._conn.execute(stmt).mappings())]

    def existing(self, persona_ids: list[str]) -> set[str]:
        """Which of these personas still exist, in any state (purged ones are gone). A purged persona never
        comes back, so a write deciding on one that is gone decides on what no write changes: unlocked."""
        stmt = select(_personas.c.id).where(_personas.c.id.in_(persona_ids))
        return set(self._read(stmt, True).scalars())

    def active_list(self, workspace_id: str, limit: int = 1000) -> list[PersonaSummary]:
        stmt = select(_personas.c.id, _personas.c.org_id, _personas.c.created_at).where(
            _personas.c.workspace_id == workspace_id, _personas.c.state != "deleted"
        )
        stmt = stmt.order_by(_personas.c.created_at.desc(), _personas.c.id.desc()).limit(limit)
        return records(PersonaSummary, self._conn.execute(stmt).mappings())

    def personal_data(self, persona_ids: list[str]) -> dict[str, Batches]:
        """These personas' rows (the ones a user created), for a privacy export."""
        stmt = select(_personas).where(_personas.c.id.in_(persona_ids)).order_by(_personas.c.created_at)
        return {"personas": export_batches(self._conn, stmt)}
