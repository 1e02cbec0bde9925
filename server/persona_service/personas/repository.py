from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, insert, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from persona_service.kernel.db.base import table_of
from persona_service.personas.tables import GenerationRun, GenerationStep, Persona, PersonaVersion, VoiceProfile

_personas = table_of(Persona)
_versions = table_of(PersonaVersion)
_voices = table_of(VoiceProfile)
_runs = table_of(GenerationRun)
_steps = table_of(GenerationStep)


class PersonaRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    # --- personas -------------------------------------------------------------

    def get(self, workspace_id: str, persona_id: str, *, for_update: bool = False):
        stmt = select(_personas).where(_personas.c.id == persona_id, _personas.c.workspace_id == workspace_id)
        if for_update:
            stmt = stmt.with_for_update()
        return self.conn.execute(stmt).mappings().first()

    def insert(self, **values):
        return self.conn.execute(insert(_personas).values(**values).returning(_personas)).mappings().one()

    def update(self, persona_id: str, **values):
        stmt = update(_personas).where(_personas.c.id == persona_id).values(**values).returning(_personas)
        return self.conn.execute(stmt).mappings().one()

    def slug_owner(self, workspace_id: str, slug: str) -> str | None:
        stmt = select(_personas.c.id).where(_personas.c.workspace_id == workspace_id, _personas.c.slug == slug)
        return self.conn.execute(stmt).scalar()

    def next_fork_ordinal(self, persona_id: str) -> int:
        """Atomically claim the next fork ordinal of a parent."""
        stmt = (
            update(_personas)
            .where(_personas.c.id == persona_id)
            .values(fork_count=_personas.c.fork_count + 1)
            .returning(_personas.c.fork_count)
        )
        return self.conn.execute(stmt).scalar_one()

    def list_page(self, workspace_id: str, filters: dict, limit: int, after: tuple[datetime, str] | None):
        stmt = select(_personas).where(_personas.c.workspace_id == workspace_id)
        if filters.get("state"):
            stmt = stmt.where(_personas.c.state == filters["state"])
        elif not filters.get("show_deleted"):
            stmt = stmt.where(_personas.c.state != "deleted")
        if filters.get("visibility"):
            stmt = stmt.where(_personas.c.visibility == filters["visibility"])
        if filters.get("root_id"):
            stmt = stmt.where(_personas.c.root_id == filters["root_id"])
        if after is not None:
            stmt = stmt.where(tuple_(_personas.c.created_at, _personas.c.id) < tuple_(*after))
        stmt = stmt.order_by(_personas.c.created_at.desc(), _personas.c.id.desc()).limit(limit)
        return self.conn.execute(stmt).mappings().all()

    def tree(self, workspace_id: str, root_id: str):
        stmt = select(_personas).where(_personas.c.workspace_id == workspace_id, _personas.c.root_id == root_id)
        return self.conn.execute(stmt.order_by(_personas.c.created_at)).mappings().all()

    def purge_deleted(self, now: datetime) -> list[str]:
        """Delete soft-deleted personas past their grace; returns their ids."""
        stmt = delete(_personas).where(_personas.c.state == "deleted", _personas.c.purge_at <= now).returning(_personas.c.id)
        return list(self.conn.execute(stmt).scalars())

    # --- versions and voice ---------------------------------------------------------

    def add_version(self, **values) -> None:
        self.conn.execute(insert(_versions).values(**values))

    def versions(self, persona_ids: list[str]):
        stmt = select(_versions).where(_versions.c.persona_id.in_(persona_ids)).order_by(_versions.c.version)
        return self.conn.execute(stmt).mappings().all()

    def set_voice(self, persona_id: str, **values) -> None:
        stmt = pg_insert(_voices).values(persona_id=persona_id, **values)
        stmt = stmt.on_conflict_do_update(index_elements=[_voices.c.persona_id], set_=values)
        self.conn.execute(stmt)

    def voice(self, persona_id: str):
        return self.conn.execute(select(_voices).where(_voices.c.persona_id == persona_id)).mappings().first()

    # --- generation runs ------------------------------------------------------------

    def add_run(self, **values) -> None:
        self.conn.execute(insert(_runs).values(**values))

    def finish_run(self, run_id: str, **values) -> None:
        self.conn.execute(update(_runs).where(_runs.c.id == run_id).values(**values))

    def add_step(self, **values) -> None:
        self.conn.execute(insert(_steps).values(**values))

    def steps(self, run_id: str):
        return self.conn.execute(select(_steps).where(_steps.c.run_id == run_id).order_by(_steps.c.ordinal)).mappings().all()

    # --- reads for other modules (through personas.directory) -----------------------------

    def active(self, workspace_id: str, persona_id: str):
        stmt = select(_personas).where(
            _personas.c.id == persona_id, _personas.c.workspace_id == workspace_id, _personas.c.state != "deleted"
        )
        return self.conn.execute(stmt).mappings().first()

    def active_list(self, workspace_id: str, limit: int = 1000):
        stmt = select(_personas.c.id, _personas.c.org_id, _personas.c.created_at).where(
            _personas.c.workspace_id == workspace_id, _personas.c.state != "deleted"
        )
        stmt = stmt.order_by(_personas.c.created_at.desc(), _personas.c.id.desc()).limit(limit)
        return self.conn.execute(stmt).mappings().all()
