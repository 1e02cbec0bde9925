"""SCIM Users and Groups of one organization: the protocol's semantics on
the repositories, and the organization's members kept in step through the
orgs module's MemberDirectory. Services never commit; the caller broadcasts
`org:<id>` after the commit (credentials follow the membership at once)."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from persona_service.kernel.api import ApiError, Hints, NotFound, Work, iso, new_id, utcnow
from persona_service.orgs.api import OWNER, MemberDirectory
from persona_service.scim.documents import Canonical, canonical, parse_json, project
from persona_service.scim.errors import bad_request, invalid_value, scim_error
from persona_service.scim.json_support import JSONObject, as_object, flag, objects, text
from persona_service.scim.records import Grant, GroupFields, ScimRecord, UserFields
from persona_service.scim.repository import (
    GroupRepository,
    MembershipRepository,
    OrderBy,
    ResourceRepository,
    UserRepository,
)
from persona_service.scim.schemas import GROUPS, MAX_RESULTS, SEARCH_REQUEST, USERS, ResourceType, list_response

DEFAULT_COUNT = 100
# How long the key a page ended on is kept for the next page (Walk): longer than a client takes between pages.
WALK_TTL_SECONDS = 300
ROLES = ("admin", "member")
# `persona:<workspace slug or id, or *>:<role>`: the naming rule for IdPs that push only group names.
_MAPPED_NAME = re.compile(r"^persona:([^:]+):([^:]+)$", re.IGNORECASE)
# The largest OFFSET Postgres takes (a bigint).
_LAST_OFFSET = 2**63 - 1
# Tries of a user deletion's locks (groups, then the user) before it takes a group that joined it in between
# out of order (each retry means another request added the user to a group meanwhile).
_RELOCKS = 5


class _GroupJoinedMeanwhile(Exception):
    """A group took the user in while its delete waited for the user's lock: take the locks again."""


@dataclass(frozen=True)
class Query:
    """A list or search request (RFC 7644 §3.4.2)."""

    filter: str = ""
    start_index: int = 1
    count: int = DEFAULT_COUNT
    attributes: str = ""
    excluded_attributes: str = ""
    sort_by: str = ""
    sort_order: str = ""

    @classmethod
    def from_search(cls, search: object) -> Query:
        body = as_object(search)
        if body is None:
            raise invalid_value("A search needs a SearchRequest object.")
        schemas = body.get("schemas")
        # (`in` as it always read: a list holding the URN, or a string or object's keys; a number was a 500)
        if schemas is not None and not (isinstance(schemas, list | str | dict) and SEARCH_REQUEST in schemas):
            raise invalid_value(f"A search's schemas must be [{SEARCH_REQUEST!r}].")

        def names(value: object) -> str:
            # (a name that is not a string reads as its text, in a list as alone: a list of numbers was a 500)
            return ",".join(map(str, value)) if isinstance(value, list) else str(value or "")

        count = body.get("count")
        return cls(str(body.get("filter") or ""), _integer(body.get("startIndex") or 1),
                   DEFAULT_COUNT if count is None else _integer(count), names(body.get("attributes")),
                   names(body.get("excludedAttributes")), str(body.get("sortBy") or ""),
                   str(body.get("sortOrder") or ""))


def _integer(value: object) -> int:
    """A search's startIndex or count as `int()` reads it (a number, truncated; a boolean; a numeral string)."""
    if isinstance(value, int | float | str):
        try:
            return int(value)
        except (ValueError, OverflowError):  # a float's infinity (JSON's 1e999) overflows: it was a 500
            pass
    raise invalid_value("startIndex and count are integers.")


@dataclass(frozen=True)
class Rendered:
    """A resource as SCIM answers it, with its HTTP validators."""

    body: JSONObject
    etag: str
    location: str


def etag_of(version: int) -> str:
    return f'W/"{version}"'


def check_if_match(if_match: str | None, row: ScimRecord) -> None:
    """RFC 7644 §3.14: a write whose If-Match names another version answers 412."""
    if not if_match or if_match.strip() == "*":
        return
    tags = {t.strip() for t in if_match.split(",")}
    current = etag_of(row.version)
    if current not in tags and current.removeprefix("W/") not in tags:
        raise scim_error("precondition_failed", None, "The resource has changed (its ETag is now "
                         f"{current}).", currentVersion=current)


class Walk:
    """Where clients walking a list by `startIndex` got to. SCIM pages only
    by offset (RFC 7644 §3.4.2.4) and Okta's import walks every page of
    /Users that way, so page N read N entries of the index. Each full page
    served in the default order (no sortBy) leaves its last row's
    (created_at, id) as a hint (kernel.transport.hints: Redis, a few minutes), keyed
    by organization, resource type, filter and the startIndex that follows;
    the page asked at that startIndex continues after that row by keyset.
    Any other startIndex, a sortBy, or the hint gone: the OFFSET.

    What a client sees: the page after the one it was given, where the
    OFFSET gives the rows at that position now: the same unless rows before
    it were deleted or inserted meanwhile, when the OFFSET skips or repeats
    rows and the keyset does neither (rows are appended in created_at order,
    so inserts land after it). Any client asking that startIndex within the
    TTL gets the continuation; results are not repeatable under changes
    either way (RFC 7644 §3.4.2.4: "clients SHOULD never assume repeatable
    results")."""

    def __init__(self, hints: Hints | None, org_id: str, rt: ResourceType, query: Query) -> None:
        self.hints = hints if not query.sort_by else None
        digest = hashlib.sha256(query.filter.strip().encode()).hexdigest()[:32]
        self.key = f"scim:walk:{org_id}:{rt.name}:{digest}:"

    def after(self, start: int) -> tuple[datetime, str] | None:
        """The (created_at, id) the page before `start` ended on, if a client was just given it."""
        value = self.hints.get(self.key + str(start)) if self.hints is not None and start > 1 else None
        if value is None:
            return None
        created_at, _, row_id = value.partition(" ")
        try:
            return datetime.fromisoformat(created_at), row_id
        except ValueError:
            return None

    def reached(self, start: int, rows: list[ScimRecord], count: int) -> None:
        """A page from `start` was served: remember where the next one starts (after a full page)."""
        if self.hints is not None and rows and len(rows) == count:
            last = rows[-1]
            self.hints.put(self.key + str(start + count), f"{last.created_at.isoformat()} {last.id}",
                           WALK_TTL_SECONDS)


class Resources:
    """The protocol part Users and Groups share."""

    rt: ResourceType

    def __init__(self, work: Work, org_id: str, base: str, repo: ResourceRepository,
                 hints: Hints | None = None):
        self.work, self.org_id, self.base, self._repo, self.hints = work, org_id, base, repo, hints
        self.members = work.of(MembershipRepository)
        self.directory = MemberDirectory(work)

    # --- reading ------------------------------------------------------------------

    def location(self, resource_id: str) -> str:
        return f"{self.base}{self.rt.endpoint}/{resource_id}"

    def render(self, row: ScimRecord, extra: JSONObject | None = None) -> Rendered:
        doc = row.document
        schemas = [self.rt.core.id, *(s.id for s in self.rt.extensions if s.id in doc)]
        body: JSONObject = {"schemas": schemas, "id": row.id, **doc, **(extra or {}), "meta": {
            "resourceType": self.rt.name, "created": iso(row.created_at), "lastModified": iso(row.updated_at),
            "location": self.location(row.id), "version": etag_of(row.version),
        }}
        return Rendered(body, etag_of(row.version), self.location(row.id))

    def render_many(self, rows: list[ScimRecord]) -> list[Rendered]:
        return [self.render(r) for r in rows]

    def existing(self, resource_id: str, *, for_update: bool = False) -> ScimRecord:
        row = self._repo.get(self.org_id, resource_id, for_update=for_update)
        if row is None:
            raise NotFound(self.rt.name.lower())
        return row

    def get(self, resource_id: str, attributes: str = "", excluded: str = "") -> Rendered:
        rendered = self.render_many([self.existing(resource_id)])[0]
        return Rendered(project(self.rt, rendered.body, attributes, excluded), rendered.etag, rendered.location)

    def find(self, query: Query) -> JSONObject:
        # Filters and PATCH parse with scim2-models, which loads here, not in every process (scim.schemas).
        from persona_service.scim.filters import parse_filter

        where = self._repo.where(self.rt, parse_filter(query.filter)) if query.filter.strip() else None
        start = max(1, query.start_index)
        count = min(max(0, query.count), MAX_RESULTS)
        walk = Walk(self.hints, self.org_id, self.rt, query)
        # (a search's startIndex is any JSON number: past Postgres' bigint OFFSET, no page holds a row; it was a 500)
        offset = min(start - 1, _LAST_OFFSET)
        rows, total = self._repo.page(self.org_id, where, self._order(query), offset, count, walk.after(start))
        walk.reached(start, rows, count)
        resources = [project(self.rt, r.body, query.attributes, query.excluded_attributes)
                     for r in self.render_many(rows)]
        return list_response(resources, total, start)

    def _order(self, query: Query) -> OrderBy:
        if not query.sort_by:
            return []
        from persona_service.scim.filters import parse_filter

        node = parse_filter(f"{query.sort_by} pr")  # the same attribute rules as filters
        order = self._repo.order(self.rt, node, descending=query.sort_order.lower() == "descending")
        if query.sort_order and query.sort_order.lower() not in ("ascending", "descending"):
            raise bad_request("invalidValue", "sortOrder is `ascending` or `descending`.")
        return order

    # --- writing ------------------------------------------------------------------

    def _unique(self, name: str, resource_id: str | None = None) -> None:
        holder = self._repo.named(self.org_id, name)
        if holder is not None and holder != resource_id:
            raise scim_error("state_conflict", "uniqueness", f"A {self.rt.name} with {self.rt.naming} "
                             f"{name!r} exists.", conflictField=self.rt.naming)

    def create(self, data: bytes) -> Rendered:
        doc = canonical(self.rt, parse_json(data))
        self._unique(doc.name)
        return self.render(self._create(doc))

    def replace(self, resource_id: str, data: bytes, if_match: str | None) -> Rendered:
        row = self.existing(resource_id, for_update=True)
        check_if_match(if_match, row)
        return self._write(row, canonical(self.rt, parse_json(data)))

    def patch(self, resource_id: str, data: bytes, if_match: str | None) -> Rendered:
        row = self.existing(resource_id, for_update=True)
        check_if_match(if_match, row)
        from persona_service.scim.patch import apply_patch

        return self._write(row, apply_patch(self.rt, row.document, parse_json(data)))

    def _write(self, row: ScimRecord, doc: Canonical) -> Rendered:
        self._unique(doc.name, row.id)
        if doc.document == row.document:
            return self.render(row)  # nothing changed: same version, same ETag
        return self.render(self._update(row, doc))

    def delete(self, resource_id: str, if_match: str | None) -> None:
        row = self.locked_for_delete(resource_id)
        check_if_match(if_match, row)
        self._delete(row)

    def locked_for_delete(self, resource_id: str) -> ScimRecord:
        """The resource, locked with whatever its deletion changes (by default its row)."""
        return self.existing(resource_id, for_update=True)

    def _create(self, doc: Canonical) -> ScimRecord:
        raise NotImplementedError

    def _update(self, row: ScimRecord, doc: Canonical) -> ScimRecord:
        raise NotImplementedError

    def _delete(self, row: ScimRecord) -> None:
        raise NotImplementedError

    # --- what groups grant ----------------------------------------------------------

    def regrant(self, user_ids: set[str]) -> None:
        """Each user's role and workspaces, from the mapped groups they are in."""
        for user_id in user_ids:
            grants = self.members.grants(self.org_id, user_id)
            role = "admin" if any(g.role == "admin" for g in grants) else "member"
            scoped = grants and all(g.workspace_id for g in grants)
            workspaces = sorted({g.workspace_id for g in grants if g.workspace_id}) if scoped else None
            self.directory.grant(self.org_id, user_id, role, workspaces)


def _email(user: Canonical) -> str:
    emails = [e for e in objects(user.document, "emails") if text(e, "value") is not None]
    emails.sort(key=lambda e: not e.get("primary"))
    address = text(emails[0], "value") if emails else None
    if address is not None:
        return address
    name = user.name
    return name if "@" in name else f"scim-{uuid.uuid4().hex}@scim.invalid"


def _display(user: Canonical) -> str:
    name = as_object(user.document.get("name")) or {}
    given = " ".join(p for p in (text(name, "givenName"), text(name, "familyName")) if p)
    return (text(user.document, "displayName") or text(name, "formatted") or given or user.name)[:200]


def _active(user: Canonical) -> bool:
    return flag(user.document, "active", True)


class Users(Resources):
    rt = USERS

    def __init__(self, work: Work, org_id: str, base: str, hints: Hints | None = None):
        super().__init__(work, org_id, base, work.of(UserRepository), hints)

    def render_many(self, rows: list[ScimRecord]) -> list[Rendered]:
        groups: dict[str, list[dict[str, str]]] = {}
        for ref in self.members.groups_of(self.org_id, [r.id for r in rows]):
            groups.setdefault(ref.user_id, []).append({
                "value": ref.group_id, "display": ref.display_name, "$ref": f"{self.base}/Groups/{ref.group_id}",
                "type": "direct"})
        return [self.render(r, {"groups": groups[r.id]} if r.id in groups else None) for r in rows]

    def _fields(self, doc: Canonical) -> UserFields:
        return UserFields(user_name=doc.name, external_id=text(doc.document, "externalId"),
                          display_name=text(doc.document, "displayName"), active=_active(doc),
                          document=doc.document)

    def _create(self, doc: Canonical) -> ScimRecord:
        # Who the address names is decided under its lock (provision: OrgRepository.lock_email); whether that
        # person is a SCIM user already, by the key of the row this inserts (a root locked after the address
        # would take the lock order backwards: a PUT of that user locks its row, then the address).
        provisioned = self.directory.provision(self.org_id, _email(doc), _display(doc))
        made = self._repo.insert_new(self.org_id, provisioned.user_id, self._fields(doc))
        if made is None:
            raise scim_error("state_conflict", "uniqueness", "Another SCIM user has this email address.",
                             conflictField="emails")
        self._activate(provisioned.user_id, _active(doc))
        return made

    def _update(self, row: ScimRecord, doc: Canonical) -> ScimRecord:
        # The address (a lock by name) before the keys a deactivation revokes: the lock order (docs/concurrency.md)
        self.directory.update_profile(self.org_id, row.id, _email(doc), _display(doc))
        self._activate(row.id, _active(doc))
        return self._repo.update(self.org_id, row.id, self._fields(doc))

    def _activate(self, user_id: str, active: bool) -> None:
        if not active and self.directory.role_of(self.org_id, user_id) == OWNER:
            raise bad_request("mutability", "The organization's owner cannot be deactivated through SCIM.")
        self.directory.set_active(self.org_id, user_id, active, utcnow())

    def _delete(self, row: ScimRecord) -> None:
        if self.directory.role_of(self.org_id, row.id) == OWNER:
            raise bad_request("mutability", "The organization's owner cannot be deleted through SCIM.")
        self.forget(row)
        self.directory.remove(self.org_id, row.id, utcnow())

    def locked_for_delete(self, resource_id: str) -> ScimRecord:
        """The user FOR UPDATE, after the groups it is in (MembershipRepository.lock_groups_with: groups
        before users). A group that took the user in between (it committed while this waited on the
        user) is not locked yet: the savepoint gives the user back and the locks are taken again."""
        for _ in range(_RELOCKS):
            try:
                with self.work.savepoint():  # (left by an exception: rolled back, its locks released)
                    groups = self.members.lock_groups_with(self.org_id, resource_id)
                    row = self.existing(resource_id, for_update=True)
                    if set(self.members.groups_with(self.org_id, resource_id)) <= groups:
                        return row
                    raise _GroupJoinedMeanwhile
            except _GroupJoinedMeanwhile:
                continue
        return self.existing(resource_id, for_update=True)  # (forget locks the groups it finds)

    def forget(self, row: ScimRecord) -> None:
        """Drop the user's SCIM record and every group membership (their
        membership of the organization is the orgs module's)."""
        groups = self.work.of(GroupRepository)
        for group_id in self.members.groups_with(self.org_id, row.id):
            group = groups.get(self.org_id, group_id, for_update=True)
            if group is not None:
                doc = {**group.document, "members": [m for m in objects(group.document, "members")
                                                     if m.get("value") != row.id]}
                groups.update_document(self.org_id, group_id, {k: v for k, v in doc.items() if v})
        self.members.drop_user(self.org_id, row.id)
        self._repo.delete(self.org_id, row.id)


def lock_personal_data(work: Work, org_id: str, user_id: str) -> None:
    """Before a person's erasure locks their membership: their SCIM user, locked as its deletion locks it (the
    groups it is in, then the user). A group write takes its group, its members, then their memberships
    (`regrant`), so an erasure that took the membership first would meet it in a cycle."""
    _locked_user(Users(work, org_id, ""), user_id)


def erase_personal_data(work: Work, org_id: str, user_id: str) -> dict[str, int]:
    """Right to erasure: the SCIM record (the IdP's copy of the profile) goes too (its locks are held since
    `lock_personal_data`: taking them again finds the same groups)."""
    users = Users(work, org_id, "")
    row = _locked_user(users, user_id)
    if row is None:
        return {}
    users.forget(row)
    return {"scim_users_deleted": 1}


def _locked_user(users: Users, user_id: str) -> ScimRecord | None:
    try:
        return users.locked_for_delete(user_id)
    except NotFound:
        return None


class Groups(Resources):
    rt = GROUPS

    def __init__(self, work: Work, org_id: str, base: str, hints: Hints | None = None):
        super().__init__(work, org_id, base, work.of(GroupRepository), hints)

    def _grant(self, doc: Canonical) -> Grant | None:
        """What the group's name maps to (see scim.proto), or None for a plain group."""
        found = _MAPPED_NAME.match(doc.name.strip())
        if found is None:
            return None
        workspace, role = found.group(1).strip(), found.group(2).strip().lower()
        if role not in ROLES:
            raise invalid_value(f"A mapped group's role is one of {', '.join(ROLES)}, not {role!r}.",
                                [{"path": "displayName", "code": "one_of", "expected": {"oneOf": list(ROLES)}}])
        if workspace == "*":
            return Grant(role, None)
        workspace_id = self.directory.workspace(self.org_id, workspace)
        if workspace_id is None:
            raise invalid_value(f"The organization has no workspace {workspace!r}.",
                                [{"path": "displayName", "code": "not_found", "value": workspace}])
        return Grant(role, workspace_id)

    def _member_ids(self, doc: Canonical) -> set[str]:
        values = [text(m, "value") for m in objects(doc.document, "members")]
        wanted = {v for v in values if v is not None}
        if None in values:
            raise invalid_value("Every member needs a `value` (a user id).")
        unknown = sorted(wanted - self.members.known_users(self.org_id, wanted))
        if unknown:
            raise invalid_value("Members must be SCIM users of the organization.",
                                [{"path": "members", "code": "not_found", "value": v} for v in unknown])
        return wanted

    def _fields(self, doc: Canonical) -> GroupFields:
        return GroupFields(display_name=doc.name, external_id=text(doc.document, "externalId"),
                           document=doc.document)

    def _create(self, doc: Canonical) -> ScimRecord:
        grant, members = self._grant(doc), self._member_ids(doc)
        row = self._repo.insert(self.org_id, new_id("scim_group"), self._fields(doc))
        self._settle(row.id, grant, set(), members)
        return row

    def _update(self, row: ScimRecord, doc: Canonical) -> ScimRecord:
        grant, members = self._grant(doc), self._member_ids(doc)
        updated = self._repo.update(self.org_id, row.id, self._fields(doc))
        self._settle(row.id, grant, self.members.members(row.id), members)
        return updated

    def _delete(self, row: ScimRecord) -> None:
        before = self.members.members(row.id)
        self._repo.delete(self.org_id, row.id)
        self.regrant(before)

    def _settle(self, group_id: str, grant: Grant | None, before: set[str], after: set[str]) -> None:
        self.members.set_grant(self.org_id, group_id, grant)
        self.members.set_members(self.org_id, group_id, after)
        self.regrant(before | after)


def resources_for(kind: str, work: Work, org_id: str, base: str, hints: Hints | None = None) -> Resources:
    return (Users if kind == "User" else Groups)(work, org_id, base, hints)


def not_supported(_: object = None) -> ApiError:
    return scim_error("not_implemented", None, "Searching every resource type at once is not supported: "
                      "search /Users/.search or /Groups/.search.")
