from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import ColumnElement, Connection, delete, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from persona_service.kernel.db.base import table_of
from persona_service.kernel.db.records import record, record_or_none, records
from persona_service.scim.records import Grant, GroupRef, ScimRecord
from persona_service.scim.tables import ScimGroup, ScimGroupMember, ScimUser

_users = table_of(ScimUser)
_groups = table_of(ScimGroup)
_members = table_of(ScimGroupMember)

# Attributes kept as columns, by lower-case path (filters and sorting use them).
USER_COLUMNS: Mapping[str, Any] = {
    "id": _users.c.id, "username": _users.c.user_name, "externalid": _users.c.external_id,
    "displayname": _users.c.display_name, "active": _users.c.active,
    "meta.created": _users.c.created_at, "meta.lastmodified": _users.c.updated_at,
}
GROUP_COLUMNS: Mapping[str, Any] = {
    "id": _groups.c.id, "displayname": _groups.c.display_name, "externalid": _groups.c.external_id,
    "meta.created": _groups.c.created_at, "meta.lastmodified": _groups.c.updated_at,
}


class ResourceRepository:
    """Users or Groups of one organization (the two tables share this shape)."""

    def __init__(self, conn: Connection, table, naming_column, columns: Mapping[str, Any]):
        self.conn, self.table, self.naming, self.columns = conn, table, naming_column, columns
        self.document = table.c.document
        self._record = select(table.c.id, table.c.document, table.c.version, table.c.created_at, table.c.updated_at)

    def get(self, org_id: str, resource_id: str, *, for_update: bool = False) -> ScimRecord | None:
        stmt = self._record.where(self.table.c.org_id == org_id, self.table.c.id == resource_id)
        if for_update:
            stmt = stmt.with_for_update()
        return record_or_none(ScimRecord, self.conn.execute(stmt).mappings().first())

    def named(self, org_id: str, name: str) -> str | None:
        """The resource holding this name (case-insensitive), if any."""
        stmt = select(self.table.c.id).where(self.table.c.org_id == org_id, func.lower(self.naming) == name.lower())
        return self.conn.execute(stmt).scalar()

    def page(self, org_id: str, where: ColumnElement[bool] | None, order_by: list[Any], offset: int,
             limit: int) -> tuple[list[ScimRecord], int]:
        scoped = self.table.c.org_id == org_id if where is None else (self.table.c.org_id == org_id) & where
        total = self.conn.execute(select(func.count()).select_from(self.table).where(scoped)).scalar_one()
        if limit <= 0:
            return [], total
        stmt = self._record.where(scoped).order_by(*order_by, self.table.c.created_at, self.table.c.id)
        rows = self.conn.execute(stmt.offset(offset).limit(limit)).mappings()
        return records(ScimRecord, rows), total

    def insert(self, **values: Any) -> ScimRecord:
        stmt = insert(self.table).values(version=1, **values).returning(*self._record.selected_columns)
        return record(ScimRecord, self.conn.execute(stmt).mappings().one())

    def update(self, org_id: str, resource_id: str, **values: Any) -> ScimRecord:
        stmt = (update(self.table).where(self.table.c.org_id == org_id, self.table.c.id == resource_id)
                .values(version=self.table.c.version + 1, updated_at=func.now(), **values)
                .returning(*self._record.selected_columns))
        return record(ScimRecord, self.conn.execute(stmt).mappings().one())

    def delete(self, org_id: str, resource_id: str) -> None:
        self.conn.execute(delete(self.table).where(self.table.c.org_id == org_id, self.table.c.id == resource_id))


def user_repository(conn: Connection) -> ResourceRepository:
    return ResourceRepository(conn, _users, _users.c.user_name, USER_COLUMNS)


def group_repository(conn: Connection) -> ResourceRepository:
    return ResourceRepository(conn, _groups, _groups.c.display_name, GROUP_COLUMNS)


class MembershipRepository:
    """Who is in which group, and what the groups grant."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def known_users(self, org_id: str, user_ids: Iterable[str]) -> set[str]:
        wanted = list(set(user_ids))
        if not wanted:
            return set()
        stmt = select(_users.c.id).where(_users.c.org_id == org_id, _users.c.id.in_(wanted))
        return set(self.conn.execute(stmt).scalars())

    def members(self, group_id: str) -> set[str]:
        return set(self.conn.execute(select(_members.c.user_id).where(_members.c.group_id == group_id)).scalars())

    def set_members(self, org_id: str, group_id: str, user_ids: set[str]) -> None:
        self.conn.execute(delete(_members).where(_members.c.group_id == group_id,
                                                 _members.c.user_id.not_in(list(user_ids) or [""])))
        if user_ids:
            self.conn.execute(pg_insert(_members).values(
                [{"group_id": group_id, "user_id": u, "org_id": org_id} for u in user_ids]).on_conflict_do_nothing())

    def set_grant(self, org_id: str, group_id: str, grant: Grant | None) -> None:
        self.conn.execute(update(_groups).where(_groups.c.org_id == org_id, _groups.c.id == group_id).values(
            role=grant.role if grant else None, workspace_id=grant.workspace_id if grant else None))

    def groups_of(self, org_id: str, user_ids: Iterable[str]) -> list[GroupRef]:
        stmt = (select(_members.c.user_id, _groups.c.id.label("group_id"), _groups.c.display_name)
                .join(_groups, _groups.c.id == _members.c.group_id)
                .where(_members.c.org_id == org_id, _members.c.user_id.in_(list(user_ids)))
                .order_by(_groups.c.created_at, _groups.c.id))
        return records(GroupRef, self.conn.execute(stmt).mappings())

    def grants(self, org_id: str, user_id: str) -> list[Grant]:
        stmt = (select(_groups.c.role, _groups.c.workspace_id)
                .join(_members, _members.c.group_id == _groups.c.id)
                .where(_members.c.org_id == org_id, _members.c.user_id == user_id, _groups.c.role.is_not(None)))
        return records(Grant, self.conn.execute(stmt).mappings())

    def groups_with(self, org_id: str, user_id: str) -> list[str]:
        stmt = select(_members.c.group_id).where(_members.c.org_id == org_id, _members.c.user_id == user_id)
        return list(self.conn.execute(stmt).scalars())

    def drop_user(self, org_id: str, user_id: str) -> None:
        self.conn.execute(delete(_members).where(_members.c.org_id == org_id, _members.c.user_id == user_id))
