from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Connection,
    Numeric,
    SQLColumnExpression,
    String,
    Text,
    and_,
    cast,
    column,
    delete,
    desc,
    exists,
    false,
    func,
    literal,
    literal_column,
    not_,
    or_,
    select,
    true,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import Insert as PgInsert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.selectable import TableValuedAlias

from persona_service.kernel.api import (
    DECIDES_NOTHING,
    Aggregate,
    declare_aggregate,
    lock_root,
    record,
    record_or_none,
    records,
    row_columns,
    table_of,
)
from persona_service.scim.errors import bad_request
from persona_service.scim.records import Grant, GroupFields, GroupRef, ScimRecord, UserFields
from persona_service.scim.schemas import Attribute, ResourceType
from persona_service.scim.tables import ScimGroup, ScimGroupMember, ScimUser, ScimUserCount

# The filter compiler below reads the nodes scim.filters parsed: scim2-models is loaded by then, and every
# process that only loads these tables (the registry) is spared it (scim.schemas).
if TYPE_CHECKING:
    from scim2_models.path import AttrPath, CompareOperator, Comparison, FilterNode, Present

_users = table_of(ScimUser)
_groups = table_of(ScimGroup)
_members = table_of(ScimGroupMember)
# A SCIM group with its memberships: a PATCH/PUT of the group and a user's deletion (which leaves every group it
# was in) lock the group first (kernel.data.aggregates; the lock order is docs/concurrency.md's).
GROUP = declare_aggregate("scim_group", _groups, _members, before_members=True)
# A SCIM user: its row (the document as the IdP sent it, its e-mails included). Declared after the group: a write
# that takes both takes groups, then users (a group write its members FOR SHARE, a user's deletion its groups
# first). Its identity's address (the orgs module's user record) is held by name (OrgRepository.lock_email).
# Both before any membership (the erasure locks them, then the membership it ends; a group write regrants its
# members' memberships last): first in the lock order, and no write holding its caller's membership locks them.
USER = declare_aggregate("scim_user", _users, before_members=True)
_user_counts = table_of(ScimUserCount)

# A column, or an expression standing for one (what a filter compares), of whatever SQL type: SQLAlchemy's
# covariant form of ColumnElement.
Sql = SQLColumnExpression[object]
# Attributes kept as columns, by lower-case path (filters and sorting use them).
USER_COLUMNS: Mapping[str, ColumnElement[object]] = {
    "id": _users.c.id, "username": _users.c.user_name, "externalid": _users.c.external_id,
    "displayname": _users.c.display_name, "active": _users.c.active,
    "meta.created": _users.c.created_at, "meta.lastmodified": _users.c.updated_at,
}
GROUP_COLUMNS: Mapping[str, ColumnElement[object]] = {
    "id": _groups.c.id, "displayname": _groups.c.display_name, "externalid": _groups.c.external_id,
    "meta.created": _groups.c.created_at, "meta.lastmodified": _groups.c.updated_at,
}

# An ORDER BY (a list's sortBy), as `order` builds it for `page`.
OrderBy = list[ColumnElement[object]]


class ResourceRepository:
    """Users or Groups of one organization (the two tables share this shape)."""

    def __init__(self, conn: Connection, aggregate: Aggregate, naming_column: Sql,
                 columns: Mapping[str, ColumnElement[object]],
                 counts: tuple[ColumnElement[str], ColumnElement[int]] | None = None) -> None:
        self._conn, self.aggregate, self.naming, self.columns = conn, aggregate, naming_column, columns
        self.table = table = aggregate.root
        self.counts = counts  # a kept count per organization (its org_id, total columns), if the table has one
        self.document = table.c.document
        self._record = select(table.c.id, table.c.document, table.c.version, table.c.created_at, table.c.updated_at)

    def get(self, org_id: str, resource_id: str, *, for_update: bool = False) -> ScimRecord | None:
        """The resource; `for_update`: locked (`lock_root`: every write of a user or a group starts there)."""
        where = (self.table.c.org_id == org_id, self.table.c.id == resource_id)
        if for_update:
            return lock_root(self._conn, self.aggregate, ScimRecord, *where)
        return record_or_none(ScimRecord, self._conn.execute(self._record.where(*where)).mappings().first())

    def named(self, org_id: str, name: str) -> str | None:
        """The resource holding this name (case-insensitive), if any. A friendlier 409 than the unique index's,
        which decides: two writes taking one name at once get 201/200 and 409 from it, as serially."""
        stmt = select(self.table.c.id).where(self.table.c.org_id == org_id, func.lower(self.naming) == name.lower())
        found = self._conn.execute(stmt.execution_options(**{DECIDES_NOTHING: True})).scalar()
        return None if found is None else str(found)  # the id (the aggregate's root types no column)

    def where(self, rt: ResourceType, node: FilterNode) -> ColumnElement[bool]:
        """A parsed SCIM filter as a WHERE clause on this table."""
        return SqlFilter(rt, self.document, self.columns).where(node)

    def order(self, rt: ResourceType, node: FilterNode, descending: bool) -> OrderBy:
        """`sortBy` (parsed as `<attribute> pr`) as an ORDER BY, nulls last."""
        key = SqlFilter(rt, self.document, self.columns).sort_key(node)
        return [desc(key).nulls_last() if descending else key.asc().nulls_last()]

    def page(self, org_id: str, where: ColumnElement[bool] | None, order_by: OrderBy, offset: int,
             limit: int, after: tuple[datetime, str] | None = None) -> tuple[list[ScimRecord], int]:
        """A page at `offset` of the matches in order; or, with `after` (the
        default order only: no `order_by`), the page following that
        (created_at, id) by keyset, whatever its offset."""
        scoped = self.table.c.org_id == org_id if where is None else (self.table.c.org_id == org_id) & where
        if where is None and self.counts is not None:  # the kept count, not a count of every row
            counted_org, counted = self.counts
            total = self._conn.execute(select(counted).where(counted_org == org_id)).scalar_one_or_none() or 0
        else:
            total = self._conn.execute(select(func.count()).select_from(self.table).where(scoped)).scalar_one()
        if limit <= 0:
            return [], total
        stmt = self._record.where(scoped).order_by(*order_by, self.table.c.created_at, self.table.c.id)
        if after is not None and not order_by:
            stmt = stmt.where(tuple_(self.table.c.created_at, self.table.c.id) > tuple_(*after))
        else:
            stmt = stmt.offset(offset)
        rows = self._conn.execute(stmt.limit(limit)).mappings()
        return records(ScimRecord, rows), total

    def insert(self, org_id: str, resource_id: str, fields: UserFields | GroupFields) -> ScimRecord:
        stmt = self._insert(org_id, resource_id, fields).returning(*self._record.selected_columns)
        return record(ScimRecord, self._conn.execute(stmt).mappings().one())

    def insert_new(self, org_id: str, resource_id: str, fields: UserFields | GroupFields) -> ScimRecord | None:
        """`insert`, or None when the organization has this id already (its own or another write's, which this
        waits for): the key decides, so the write needs no lock on a row that may not exist yet."""
        stmt = self._insert(org_id, resource_id, fields) \
            .on_conflict_do_nothing(index_elements=[self.table.c.org_id, self.table.c.id]) \
            .returning(*self._record.selected_columns)
        return record_or_none(ScimRecord, self._conn.execute(stmt).mappings().first())

    def _insert(self, org_id: str, resource_id: str, fields: UserFields | GroupFields) -> PgInsert:
        return pg_insert(self.table).values(org_id=org_id, id=resource_id, version=1, **row_columns(fields))

    def update(self, org_id: str, resource_id: str, fields: UserFields | GroupFields) -> ScimRecord:
        return self._update(org_id, resource_id, row_columns(fields))

    def update_document(self, org_id: str, resource_id: str, document: dict[str, object]) -> ScimRecord:
        """A new version of the document alone (its attributes kept as columns unchanged)."""
        return self._update(org_id, resource_id, {"document": document})

    def _update(self, org_id: str, resource_id: str, values: Mapping[str, object]) -> ScimRecord:
        stmt = (update(self.table).where(self.table.c.org_id == org_id, self.table.c.id == resource_id)
                .values(version=self.table.c.version + 1, updated_at=func.now(), **values)
                .returning(*self._record.selected_columns))
        return record(ScimRecord, self._conn.execute(stmt).mappings().one())

    def delete(self, org_id: str, resource_id: str) -> None:
        self._conn.execute(delete(self.table).where(self.table.c.org_id == org_id, self.table.c.id == resource_id))


class UserRepository(ResourceRepository):
    def __init__(self, conn: Connection) -> None:
        super().__init__(conn, USER, _users.c.user_name, USER_COLUMNS,
                         counts=(_user_counts.c.org_id, _user_counts.c.total))


class GroupRepository(ResourceRepository):
    def __init__(self, conn: Connection) -> None:
        super().__init__(conn, GROUP, _groups.c.display_name, GROUP_COLUMNS)


class MembershipRepository:
    """Who is in which group, and what the groups grant."""

    def __init__(self, conn: Connection):
        self._conn = conn

    def known_users(self, org_id: str, user_ids: Iterable[str]) -> set[str]:
        wanted = list(set(user_ids))
        if not wanted:
            return set()
        # The users' roots held FOR SHARE (after the group's: groups, then users), in id order: a DELETE /Users of
        # one of them (which locks its row FOR UPDATE, after its groups) waits for this membership's commit and
        # then removes it, or removed the user first and this finds none; two groups taking one user go on side
        # by side. (KEY SHARE would let the user's row change meanwhile: the guard does not count it as held.)
        stmt = (select(_users.c.id).where(_users.c.org_id == org_id, _users.c.id.in_(wanted))
                .order_by(_users.c.id).with_for_update(read=True))
        return set(self._conn.execute(stmt).scalars())

    def lock_groups_with(self, org_id: str, user_id: str) -> set[str]:
        """Lock FOR UPDATE, in id order, the groups the user is in: a change of a user's memberships
        takes its groups before the user, the order a group write takes them (its row, then its
        members' `known_users`), so the two never wait on each other in a cycle."""
        stmt = (select(_groups.c.id)
                .where(_groups.c.org_id == org_id, _groups.c.id.in_(
                    select(_members.c.group_id).where(_members.c.org_id == org_id, _members.c.user_id == user_id)))
                .order_by(_groups.c.id).with_for_update())
        return set(self._conn.execute(stmt).scalars())

    def members(self, group_id: str) -> set[str]:
        return set(self._conn.execute(select(_members.c.user_id).where(_members.c.group_id == group_id)).scalars())

    def set_members(self, org_id: str, group_id: str, user_ids: set[str]) -> None:
        self._conn.execute(delete(_members).where(_members.c.group_id == group_id,
                                                 _members.c.user_id.not_in(list(user_ids) or [""])))
        if user_ids:
            self._conn.execute(pg_insert(_members).values(
                [{"group_id": group_id, "user_id": u, "org_id": org_id} for u in user_ids]).on_conflict_do_nothing())

    def set_grant(self, org_id: str, group_id: str, grant: Grant | None) -> None:
        self._conn.execute(update(_groups).where(_groups.c.org_id == org_id, _groups.c.id == group_id).values(
            role=grant.role if grant else None, workspace_id=grant.workspace_id if grant else None))

    def groups_of(self, org_id: str, user_ids: Iterable[str]) -> list[GroupRef]:
        stmt = (select(_members.c.user_id, _groups.c.id.label("group_id"), _groups.c.display_name)
                .join(_groups, _groups.c.id == _members.c.group_id)
                .where(_members.c.org_id == org_id, _members.c.user_id.in_(list(user_ids)))
                .order_by(_groups.c.created_at, _groups.c.id))
        return records(GroupRef, self._conn.execute(stmt).mappings())

    def grants(self, org_id: str, user_id: str) -> list[Grant]:
        stmt = (select(_groups.c.role, _groups.c.workspace_id)
                .join(_members, _members.c.group_id == _groups.c.id)
                .where(_members.c.org_id == org_id, _members.c.user_id == user_id, _groups.c.role.is_not(None)))
        return records(Grant, self._conn.execute(stmt).mappings())

    def groups_with(self, org_id: str, user_id: str) -> list[str]:
        stmt = select(_members.c.group_id).where(_members.c.org_id == org_id, _members.c.user_id == user_id)
        return list(self._conn.execute(stmt).scalars())

    def drop_user(self, org_id: str, user_id: str) -> None:
        self._conn.execute(delete(_members).where(_members.c.org_id == org_id, _members.c.user_id == user_id))


# --- SCIM filters as SQL: the table's columns for the attributes it keeps as
# columns, its JSONB `document` for the rest ------------------------------------


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _starts_with(column: Sql, prefix: str) -> ColumnElement[bool]:
    """`sw` as a range in byte order (`~>=~`, `~<~`: text_pattern_ops'
    operators), not `LIKE $1`: a prepared statement's generic plan takes
    the index's bounds from the parameters, where a LIKE pattern only known
    at execution gives it none and it reads every user of the organization."""
    from_ = column.op("~>=~", is_comparison=True)(prefix)
    upper = _successor(prefix)
    return from_ if upper is None else and_(from_, column.op("~<~", is_comparison=True)(upper))


def _successor(prefix: str) -> str | None:
    """The least string after every string that starts with `prefix`, in
    code point order (UTF-8's byte order); None when there is none."""
    stem = prefix.rstrip(chr(0x10FFFF))
    if not stem:
        return None
    after = ord(stem[-1]) + 1
    return stem[:-1] + chr(0xE000 if 0xD800 <= after <= 0xDFFF else after)  # surrogates are not characters


class _SqlBoolean:
    """`and`, `or` and `not` as SQL; the terms are the subclass's."""

    def where(self, node: FilterNode) -> ColumnElement[bool]:
        from scim2_models.path import LogicalExpr, LogicalOperator, Not

        if isinstance(node, LogicalExpr):
            terms = [self.where(t) for t in node.terms]
            return and_(*terms) if node.op == LogicalOperator.and_ else or_(*terms)
        if isinstance(node, Not):
            return not_(self.where(node.expr))
        return self._term(node)

    def _term(self, node: FilterNode) -> ColumnElement[bool]:
        raise NotImplementedError


class SqlFilter(_SqlBoolean):
    """A filter as a WHERE clause on one resource table. `columns` maps
    lower-case attribute paths (`username`, `meta.created`) to columns."""

    def __init__(self, rt: ResourceType, document: ColumnElement[object],
                 columns: Mapping[str, ColumnElement[object]]) -> None:
        self.rt, self.document, self.columns = rt, document, columns

    def _term(self, node: FilterNode) -> ColumnElement[bool]:
        from scim2_models.path import Comparison, Present, ValuePath

        if isinstance(node, ValuePath):
            attribute = self._attribute(node.attr_path)
            element = self._elements(node.attr_path.uri, attribute)
            inner = _ElementFilter(attribute, element.c.value).where(node.val_filter)
            return exists(select(literal(1)).select_from(element).where(inner))
        if isinstance(node, Comparison | Present):
            path = node.attr_path
            attribute = self._attribute(path)
            column = self.columns.get(f"{attribute.name}.{path.sub_attr}".lower() if path.sub_attr
                                      else attribute.name.lower())
            if column is not None:
                return _compare(node, column, _leaf(attribute, path.sub_attr))
            if attribute.multi_valued:
                # `emails co "x"` compares the elements' `value` (RFC 7644 §3.4.2.2).
                sub = path.sub_attr or "value"
                element = self._elements(path.uri, attribute)
                leaf = _leaf(attribute, sub)
                inner = _compare(node, _as_text(element.c.value[leaf.name], leaf), leaf)
                return exists(select(literal(1)).select_from(element).where(inner))
            leaf = _leaf(attribute, path.sub_attr)
            keys = [k for k in (path.uri if path.uri and self.rt.schema_for(path.uri) is not self.rt.core else None,
                                attribute.name, path.sub_attr and leaf.name) if k]
            return _compare(node, _typed(_text_at(self.document, keys), leaf), leaf)
        raise bad_request("invalidFilter", "The filter uses an unsupported expression.")

    def sort_key(self, node: FilterNode) -> ColumnElement[object]:
        """What `sortBy` names (parsed as `<attribute> pr`): a column, or the
        document's text (a plural attribute's first value)."""
        from scim2_models.path import Present

        if not isinstance(node, Present):
            raise bad_request("invalidValue", "sortBy names one attribute.")
        path = node.attr_path
        attribute = self._attribute(path)
        column = self.columns.get(
            f"{attribute.name}.{path.sub_attr}".lower() if path.sub_attr else attribute.name.lower())
        if column is not None:
            return column
        holder = self._json(path.uri, attribute)
        text: ColumnElement[object]
        if attribute.multi_valued:
            text = holder[0][path.sub_attr or "value"].astext
        else:
            text = holder[path.sub_attr].astext if path.sub_attr else holder.astext
        return text

    def _attribute(self, path: AttrPath) -> Attribute:
        attribute = self.rt.attribute(path.attr, path.uri)
        if attribute is None or attribute.returned == "never":
            raise bad_request("invalidFilter", f"The filter names an unknown attribute {str(path)!r}.")
        if path.sub_attr and attribute.sub(path.sub_attr) is None:
            raise bad_request("invalidFilter", f"The filter names an unknown attribute {str(path)!r}.")
        return attribute

    def _json(self, uri: str | None, attribute: Attribute) -> ColumnElement[object]:
        holder = self.document
        schema = self.rt.schema_for(uri) if uri else None
        if schema is not None and schema is not self.rt.core:
            holder = holder[schema.id]
        return holder[attribute.name]

    def _elements(self, uri: str | None, attribute: Attribute) -> TableValuedAlias:
        return func.jsonb_array_elements(func.coalesce(self._json(uri, attribute), cast(literal("[]"), JSONB))
                                         ).table_valued(column("value", JSONB))


def _leaf(attribute: Attribute, sub: str | None) -> Attribute:
    if sub is None:
        return attribute
    found = attribute.sub(sub)
    if found is None:
        raise bad_request("invalidFilter", f"{attribute.name} has no sub-attribute {sub!r}.")
    return found


def _as_text(json_value: ColumnElement[object], leaf: Attribute) -> Sql:
    return _typed(json_value.astext, leaf)


def _typed(value: Sql, leaf: Attribute) -> Sql:
    if leaf.type == "boolean":
        return cast(value, Boolean)
    if leaf.type in ("integer", "decimal"):
        return cast(value, Numeric)
    return value


def _text_at(document: ColumnElement[object], keys: list[str]) -> Sql:
    """`document #>> '{k1,k2}'::text[]` with the path written in the statement,
    not bound: an expression index on it (tables.py, the enterprise
    extension's) then serves generic plans too. The keys are the schema's
    attribute names and URIs (checked plain), never the client's text."""
    if not all(_PLAIN_KEY.match(key) for key in keys):
        raise ValueError(f"not a plain document path: {keys!r}")
    return document.op("#>>", return_type=Text)(literal_column(f"'{{{','.join(keys)}}}'::text[]"))


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_.:$-]+$")


class _ElementFilter(_SqlBoolean):
    """A value filter on the elements of one multi-valued attribute."""

    def __init__(self, attribute: Attribute, element: ColumnElement[object]) -> None:
        self.attribute, self.element = attribute, element

    def _term(self, node: FilterNode) -> ColumnElement[bool]:
        from scim2_models.path import Comparison, Present

        if isinstance(node, Comparison | Present):
            leaf = _leaf(self.attribute, node.attr_path.attr)
            return _compare(node, _as_text(self.element[leaf.name], leaf), leaf)
        raise bad_request("invalidFilter", "Value filters cannot nest.")


@functools.cache
def _sql_operators() -> dict[CompareOperator, Callable[[Sql, Operand], ColumnElement[bool]]]:
    from scim2_models.path import CompareOperator

    return {
        CompareOperator.eq: lambda c, v: c == v,
        CompareOperator.ne: lambda c, v: or_(c != v, c.is_(None)),
        CompareOperator.co: lambda c, v: c.like(f"%{_like(str(v))}%", escape="\\"),  # (a string: `_compare`)
        CompareOperator.sw: lambda c, v: _starts_with(c, str(v)),
        CompareOperator.ew: lambda c, v: c.like(f"%{_like(str(v))}", escape="\\"),
        CompareOperator.gt: lambda c, v: c > v,
        CompareOperator.ge: lambda c, v: c >= v,
        CompareOperator.lt: lambda c, v: c < v,
        CompareOperator.le: lambda c, v: c <= v,
    }


# A value a filter compares a column with, once checked against the attribute's type (a boolean is compared apart).
Operand = str | int | float | datetime


def _compare(node: Comparison | Present, column: Sql, leaf: Attribute) -> ColumnElement[bool]:
    from scim2_models.path import CompareOperator, Present

    if isinstance(node, Present):
        if leaf.type == "boolean":
            return column.is_not(None)
        return and_(column.is_not(None), func.coalesce(cast(column, String), "") != "")
    value: object = node.value  # as the filter's text spelled it (scim2-models reads it untyped)
    op = node.op
    if value is None:
        return column.is_(None) if op == CompareOperator.eq else column.is_not(None)
    if leaf.type == "boolean":
        if not isinstance(value, bool) or op not in (CompareOperator.eq, CompareOperator.ne):
            raise bad_request("invalidFilter", f"{leaf.name} is a boolean: compare it with eq or ne and true or false.")
        return column.is_(true() if value else false()) if op == CompareOperator.eq else column.is_not(
            true() if value else false())
    operand: Operand
    if leaf.type in ("integer", "decimal"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise bad_request("invalidFilter", f"{leaf.name} is a number.")
        operand = value
    elif leaf.type == "dateTime":
        operand = _date_time(leaf, value)
    else:
        operand = str(value)
        if not leaf.case_exact:
            column, operand = func.lower(column), operand.lower()
    if op in (CompareOperator.co, CompareOperator.sw, CompareOperator.ew) and not isinstance(operand, str):
        raise bad_request("invalidFilter", f"{op.value} compares strings.")
    return _sql_operators()[op](column, operand)


def _date_time(leaf: Attribute, value: object) -> datetime:
    """A dateTime literal (RFC 7643 §2.3.5, xsd:dateTime; without an offset: UTC)."""
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise bad_request("invalidFilter", f"{leaf.name} is a dateTime: compare it with a string such as "
                          f"\"2024-05-01T12:00:00Z\", not {value!r}.")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def recount_users(conn: Connection) -> None:
    """Set every organization's kept count of SCIM users from the rows
    (after a bulk load that bypassed the trigger, e.g. the volume seed's COPY)."""
    counted = select(_users.c.org_id, func.count().label("total")).group_by(_users.c.org_id)
    stmt = pg_insert(_user_counts).from_select(["org_id", "total"], counted)
    conn.execute(stmt.on_conflict_do_update(index_elements=[_user_counts.c.org_id], set_={"total": stmt.excluded.total}))
