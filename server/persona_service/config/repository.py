from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, bindparam, delete, select
from sqlalchemy.dialects.postgresql import insert

from persona_service.config.tables import ConfigItem
from persona_service.kernel.api import (
    DECIDES_NOTHING,
    Prepared,
    declare_aggregate,
    read_cache,
    records,
    stale,
    table_of,
)

_items = table_of(ConfigItem)
# A setting at one level on its own: its writes are one upsert or one DELETE (each locks the row it changes, or
# the one it inserts), which decide on nothing read before them (kernel.data.aggregates; docs/concurrency.md).
ITEM = declare_aggregate("config_item", _items)
# The reads below decide nothing on an item: a write of some other aggregate reads a setting it acts by (a
# persona's drift threshold in a chat reply, a test decline in billing), and a config write reads the effective
# value back only after its own upsert or DELETE. Either runs as the order in which that read came first.
_DECIDES_NOTHING = {DECIDES_NOTHING: True}
ORG_LEVEL = ""  # workspace_id of organization-level settings
PERSONA_LEVEL_PREFIX = "persona:"  # workspace_id of persona-level settings: "persona:<uuid>"


@dataclass(frozen=True, slots=True)
class ItemRecord:
    key: str
    workspace_id: str  # ORG_LEVEL, a workspace id, or persona_level(id)
    value: object  # JSON, as its key declares it (every write is checked by the key)
    updated_at: datetime


def persona_level(persona_id: str) -> str:
    return PERSONA_LEVEL_PREFIX + persona_id


# One key's rows at every level of an organization (`key_settings`: the value a chat reply acts by, its drift
# threshold, read on every reply and written rarely): prepared once, and kept in the server process's memory
# (kernel.data.read_cache), under "<org>:<key>", dropped everywhere by every write of one of those rows (`upsert`,
# `delete`: the only writes of config_items) before the write answers (issue 50: one statement a reply).
_key_rows = Prepared(
    select(_items.c.key, _items.c.workspace_id, _items.c.value, _items.c.updated_at).where(
        _items.c.org_id == bindparam("org"), _items.c.key == bindparam("key")),
    ItemRecord,
)
KEY_CACHE = "config_key"
_kept = read_cache(KEY_CACHE, tuple)
# The transaction that wrote a setting (on its connection's info): its own reads after the write skip memory, which
# drops the old rows only once it commits.
_WROTE = "config_wrote_in"


class ConfigRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    def settings(self, org_id: str, workspace_id: str, key: str | None = None, persona_id: str = "") -> list[ItemRecord]:
        """Organization- and workspace-level rows, and the persona's when
        given (for one key, or all)."""
        levels = [ORG_LEVEL, workspace_id] + ([persona_level(persona_id)] if persona_id else [])
        stmt = select(_items).where(_items.c.org_id == org_id, _items.c.workspace_id.in_(levels))
        if key is not None:
            stmt = stmt.where(_items.c.key == key)
        return records(ItemRecord, self._conn.execute(stmt.execution_options(**_DECIDES_NOTHING)).mappings())

    def key_settings(self, org_id: str, workspace_id: str, key: str, persona_id: str = "") -> list[ItemRecord]:
        """`settings(..., key=key)`: from the organization's rows of the key, kept in memory (read once a process
        until a write of one of them; an organization sets a key at a few levels, not thousands)."""
        def load() -> tuple[ItemRecord, ...]:
            return tuple(_key_rows.all(self._conn, {"org": org_id, "key": key}, decides_nothing=True))

        wrote = self._conn.info.get(_WROTE)
        rows: tuple[ItemRecord, ...] = (load() if wrote is not None and wrote is self._conn.get_transaction()
                                        else _kept.read(f"{org_id}:{key}", org_id, load) or ())
        levels = (ORG_LEVEL, workspace_id, persona_level(persona_id) if persona_id else None)
        return [row for row in rows if row.workspace_id in levels]

    def org_settings_with_prefix(self, org_id: str, prefix: str) -> list[tuple[str, object]]:
        stmt = select(_items.c.key, _items.c.value).where(
            _items.c.org_id == org_id, _items.c.workspace_id == ORG_LEVEL, _items.c.key.startswith(prefix)
        )
        return [(key, value) for key, value in self._conn.execute(stmt.execution_options(**_DECIDES_NOTHING))]

    def upsert(self, org_id: str, workspace_id: str, key: str, value: object, updated_by: str) -> None:
        stmt = insert(_items).values(org_id=org_id, workspace_id=workspace_id, key=key, value=value, updated_by=updated_by)
        stmt = stmt.on_conflict_do_update(
            index_elements=[_items.c.org_id, _items.c.workspace_id, _items.c.key],
            set_={"value": stmt.excluded.value, "updated_by": updated_by, "updated_at": stmt.excluded.updated_at},
        )
        self._conn.execute(stmt)
        self._wrote(org_id, key)

    def delete(self, org_id: str, workspace_id: str, key: str) -> None:
        self._conn.execute(
            delete(_items).where(_items.c.org_id == org_id, _items.c.workspace_id == workspace_id, _items.c.key == key)
        )
        self._wrote(org_id, key)

    def _wrote(self, org_id: str, key: str) -> None:
        """A setting of `key` changed: memory drops the organization's rows of it everywhere once this commits."""
        stale(self._conn, KEY_CACHE, f"{org_id}:{key}")
        self._conn.info[_WROTE] = self._conn.get_transaction()
