from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, bindparam, insert, select, tuple_, update

from persona_service.kernel.api import (
    DECIDES_NOTHING,
    KeyCredential,
    declare_aggregate,
    record,
    record_or_none,
    records,
    row_columns,
    table_of,
)
from persona_service.orgs.records import ApiKeyRecord, NewKey
from persona_service.orgs.tables import ApiKey, Membership, Organization, User

_keys = table_of(ApiKey)
_orgs = table_of(Organization)
_users = table_of(User)
_members = table_of(Membership)
# A key (an API key or a SCIM token) on its own: a revocation is one atomic UPDATE of it, which locks it
# (kernel.data.aggregates; the lock order is docs/concurrency.md's), and reads it back only after.
KEY = declare_aggregate("api_key", _keys)

# The hot auth read: one indexed lookup by hash, joined with what authorization needs.
_by_hash = (
    select(
        _keys.c.id,
        _keys.c.org_id,
        _keys.c.workspace_id,
        _keys.c.created_by_user_id,
        _keys.c.scopes,
        _keys.c.ip_allowlist,
        _keys.c.expires_at,
        _keys.c.revoked_at,
        _orgs.c.plan,
        _users.c.is_platform_admin,
        _members.c.role,
    )
    .join(_orgs, _orgs.c.id == _keys.c.org_id)
    .join(_users, _users.c.id == _keys.c.created_by_user_id)
    # A key acts with its creator's current role (none if they left the org).
    .outerjoin(_members, (_members.c.org_id == _keys.c.org_id) & (_members.c.user_id == _keys.c.created_by_user_id))
)

# What a key is for: the keys API's keys, or SCIM tokens (ScimTokenService).
API, SCIM = "api", "scim"

# Authentication reads the key in the caller's unit of work (a write's too) without locking it: it decides nothing
# on the key. A call let in before a revocation commits is one the serial order runs first, and the principal is
# cached across calls anyway until the revocation's invalidation reaches every process (after its commit).
_find_for_auth = _by_hash.where(_keys.c.secret_hash == bindparam("secret_hash")).execution_options(
    **{DECIDES_NOTHING: True})

_public_columns = [
    _keys.c.id,
    _keys.c.name,
    _keys.c.scopes,
    _keys.c.mode,
    _keys.c.prefix,
    _keys.c.ip_allowlist,
    _keys.c.workspace_id,
    _keys.c.created_at,
    _keys.c.expires_at,
    _keys.c.revoked_at,
]


class KeyRepository:
    def __init__(self, conn: Connection):
        self._conn = conn

    def find_for_auth(self, secret_hash: str) -> KeyCredential | None:
        row = self._conn.execute(_find_for_auth, {"secret_hash": secret_hash}).first()
        if row is None:
            return None
        return KeyCredential(
            id=row.id, org_id=row.org_id, workspace_id=row.workspace_id, user_id=row.created_by_user_id,
            scopes=frozenset(row.scopes), role=row.role, plan=row.plan, is_platform_admin=row.is_platform_admin,
            ip_allowlist=tuple(row.ip_allowlist or ()), expires_at=row.expires_at, revoked_at=row.revoked_at,
        )

    def create(self, key: NewKey) -> ApiKeyRecord:
        stmt = insert(_keys).values(**row_columns(key)).returning(*_public_columns)
        return record(ApiKeyRecord, self._conn.execute(stmt).mappings().one())

    def get_token(self, org_id: str, key_id: str) -> ApiKeyRecord | None:
        stmt = select(*_public_columns).where(_keys.c.id == key_id, _keys.c.org_id == org_id, _keys.c.purpose == SCIM)
        return record_or_none(ApiKeyRecord, self._conn.execute(stmt).mappings().first())

    def get(self, workspace_id: str, key_id: str) -> ApiKeyRecord | None:
        stmt = select(*_public_columns).where(_keys.c.id == key_id, _keys.c.workspace_id == workspace_id,
                                              _keys.c.purpose == API)
        return record_or_none(ApiKeyRecord, self._conn.execute(stmt).mappings().first())

    def secret_hash(self, key_id: str) -> str:
        secret_hash: str = self._conn.execute(select(_keys.c.secret_hash).where(_keys.c.id == key_id)).scalar_one()
        return secret_hash

    def list_page(self, workspace_id: str, limit: int, after: tuple[datetime, str] | None,
                  *, org_id: str | None = None, purpose: str = API) -> list[ApiKeyRecord]:
        """Newest first, keyset-paginated on (created_at, id) so inserts never shift a page:
        a workspace's API keys, or (org_id, purpose=SCIM) an organization's SCIM tokens."""
        where = _keys.c.org_id == org_id if org_id is not None else _keys.c.workspace_id == workspace_id
        stmt = select(*_public_columns).where(where, _keys.c.purpose == purpose)
        if after is not None:
            created_at, key_id = after
            stmt = stmt.where(tuple_(_keys.c.created_at, _keys.c.id) < tuple_(created_at, key_id))
        stmt = stmt.order_by(_keys.c.created_at.desc(), _keys.c.id.desc()).limit(limit)
        return records(ApiKeyRecord, self._conn.execute(stmt).mappings())

    def revoke(self, workspace_id: str, key_id: str, at: datetime, *, org_id: str | None = None,
               purpose: str = API) -> ApiKeyRecord | None:
        where = _keys.c.org_id == org_id if org_id is not None else _keys.c.workspace_id == workspace_id
        stmt = (
            update(_keys)
            .where(_keys.c.id == key_id, where, _keys.c.purpose == purpose, _keys.c.revoked_at.is_(None))
            .values(revoked_at=at)
            .returning(*_public_columns)
        )
        return record_or_none(ApiKeyRecord, self._conn.execute(stmt).mappings().first())
