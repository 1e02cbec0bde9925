from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select
from sqlalchemy.dialects.postgresql import insert

from persona_service.config.tables import ConfigItem
from persona_service.kernel.api import DECIDES_NOTHING, Prepared, declare_aggregate, records, table_of

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
    value: Any
    updated_at: datetime


def persona_level(persona_id: str) -> str:
    return PERSONA_LEVEL_PREFIX + persona_id


# One key's rows at the organization's, a workspace's and a persona's level (`key_settings`: the value a chat reply
# acts by, its drift threshold): prepared once, run without SQLAlchemy's per-execution layers (issue 50).
_key_rows = Prepared(
    select(_items.c.key, _items.c.workspace_id, _items.c.value, _items.c.updated_at).where(
        _items.c.org_id == bindparam("org"), _items.c.key == bindparam("key"),
        _items.c.workspace_id.in_([bindparam("org_level"), bindparam("ws"), bindparam("persona")])),
    ItemRecord,
)


class ConfigRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def settings(self, org_id: str, workspace_id: str, key: str | None = None, persona_id: str = "") -> list[ItemRecord]:
        """Organization- and workspace-level rows, and the persona's when
        given (for one key, or all)."""
        levels = [ORG_LEVEL, workspace_id] + ([persona_level(persona_id)] if persona_id else [])
        stmt = select(_items).where(_items.c.org_id == org_id, _items.c.workspace_id.in_(levels))
        if key is not None:
            stmt = stmt.where(_items.c.key == key)
        return records(ItemRecord, self.conn.execute(stmt.execution_options(**_DECIDES_NOTHING)).mappings())

    def key_settings(self, org_id: str, workspace_id: str, key: str, persona_id: str = "") -> list[ItemRecord]:
        """`settings(..., key=key)`, prepared."""
        params = {"org": org_id, "key": key, "org_level": ORG_LEVEL, "ws": workspace_id,
                  "persona": persona_level(persona_id) if persona_id else None}
        return _key_rows.all(self.conn, params, decides_nothing=True)

    def org_settings_with_prefix(self, org_id: str, prefix: str) -> list[tuple[str, Any]]:
        stmt = select(_items.c.key, _items.c.value).where(
            _items.c.org_id == org_id, _items.c.workspace_id == ORG_LEVEL, _items.c.key.startswith(prefix)
        )
        return [(key, value) for key, value in self.conn.execute(stmt.execution_options(**_DECIDES_NOTHING))]

    def upsert(self, org_id: str, workspace_id: str, key: str, value: Any, updated_by: str) -> None:
        stmt = insert(_items).values(org_id=org_id, workspace_id=workspace_id, key=key, value=value, updated_by=updated_by)
        stmt = stmt.on_conflict_do_update(
            index_elements=[_items.c.org_id, _items.c.workspace_id, _items.c.key],
            set_={"value": stmt.excluded.value, "updated_by": updated_by, "updated_at": stmt.excluded.updated_at},
        )
        self.conn.execute(stmt)

    def delete(self, org_id: str, workspace_id: str, key: str) -> None:
        self.conn.execute(
            delete(_items).where(_items.c.org_id == org_id, _items.c.workspace_id == workspace_id, _items.c.key == key)
        )
