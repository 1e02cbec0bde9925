"""Authentication: turn `Authorization: Bearer …` into a Principal.

API keys (`sk_live_…` / `sk_test_…`) are looked up by the SHA-256 of the
secret; session JWTs (HS256) are verified with the service's secret and the
membership is read for the role. Verified credentials are cached in the
process for `auth_cache_seconds`, so a hot path costs no database round
trip; revocation evicts at once, locally and (via the invalidation bus, confirmed
by each listener before the revoking call answers) in every other process.
A refused API key (unknown or revoked) is remembered briefly too, so a flood
of bad keys costs no database read each; creating a key evicts its refusal
the same way.
"""

from __future__ import annotations

import hashlib
import ipaddress
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, TypedDict, cast

from sqlalchemy import Connection

from persona_service.kernel.clock import utcnow
from persona_service.kernel.data.work import Work
from persona_service.kernel.errors import Forbidden, Unauthorized
from persona_service.kernel.principal import Principal, session_scopes, with_implied

JWT_ISSUER = "persona-service"
JWT_ALGORITHM = "HS256"


class SessionClaims(TypedDict):
    """The claims of a session token `mint_session` signed that the service reads back (and `iss`, `iat`, `exp`,
    which PyJWT checks)."""

    sub: str  # the user
    org: str
    ws: str
    jti: str


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class KeyCredential:
    """An API key as the credential store reports it (looked up by secret hash)."""

    id: str
    org_id: str
    workspace_id: str
    user_id: str
    scopes: frozenset[str]
    role: str
    plan: str
    is_platform_admin: bool
    ip_allowlist: tuple[str, ...]
    expires_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class MemberCredential:
    """A user's membership of an organization, for session tokens."""

    role: str
    plan: str
    is_platform_admin: bool
    all_workspaces: bool = False  # no SCIM group confines the member to some workspaces


class CredentialStore(Protocol):
    """The kernel port the identity module implements (Module.credentials)."""

    # Bearer prefixes of the credentials it finds by secret hash (its kinds of keys).
    key_prefixes: tuple[str, ...]

    def find_key(self, work: Work, secret_hash: str) -> KeyCredential | None: ...

    def find_member(self, work: Work, org_id: str, user_id: str, workspace_id: str) -> MemberCredential | None:
        """The membership, if the user belongs to the org and the workspace is the org's."""
        ...

    def hold_member(self, work: Work, org_id: str, user_id: str) -> bool:
        """Hold the user's membership (`FOR SHARE`) until `work`'s transaction ends; False: they are no member."""
        ...


# While the revocation bus is down a revocation in another process cannot
# reach this one: cached credentials are then trusted this long at most.
DEGRADED_TTL_SECONDS = 2.0
# Refused API keys are remembered this long and this many at most (the oldest go first).
REFUSAL_TTL_SECONDS = 10.0
REFUSAL_MAX_ENTRIES = 10_000


class CredentialCache:
    """Verified principals by cache key, trusted for `ttl_seconds` while the
    revocation bus is up (`bus_up`, kept by the listener), and for
    DEGRADED_TTL_SECONDS while it is down. Thread-safe for the server's worker
    threads (dict reads are atomic). Every eviction starts a new epoch: a
    credential read from the database before it (by a call in flight while a
    revocation committed) is never cached after it (`put` with its epoch)."""

    def __init__(self, ttl_seconds: float):
        self.ttl = ttl_seconds
        self.bus_up = False
        self._entries: dict[str, tuple[float, Principal]] = {}
        self._refusals: dict[str, tuple[float, Unauthorized]] = {}  # oldest first
        self._lock = threading.Lock()
        self.epoch = 0

    def _trusted_for(self) -> float:
        return self.ttl if self.bus_up else min(self.ttl, DEGRADED_TTL_SECONDS)

    def get(self, key: str) -> Principal | None:
        entry = self._entries.get(key)
        if entry is None or time.monotonic() - entry[0] >= self._trusted_for():
            return None
        return entry[1]

    def refusal(self, key: str) -> Unauthorized | None:
        """A fresh copy of the error `key` was refused with lately (its principal kept for the audit log)."""
        entry = self._refusals.get(key)
        if entry is None or time.monotonic() - entry[0] >= min(self._trusted_for(), REFUSAL_TTL_SECONDS):
            return None
        err = Unauthorized(entry[1].message)
        err.principal = entry[1].principal
        return err

    def refuse(self, key: str, err: Unauthorized, epoch: int) -> None:
        """Remember a refusal read from the database during `epoch` (as `put`)."""
        if self.ttl > 0:
            with self._lock:
                if epoch == self.epoch:
                    if key not in self._refusals and len(self._refusals) >= REFUSAL_MAX_ENTRIES:
                        del self._refusals[next(iter(self._refusals))]
                    self._refusals.pop(key, None)
                    self._refusals[key] = (time.monotonic(), err)

    def put(self, key: str, principal: Principal, epoch: int) -> None:
        """Cache what was read from the database during `epoch` (unless something was evicted since)."""
        if self.ttl > 0:
            with self._lock:
                if epoch == self.epoch:
                    self._entries[key] = (time.monotonic(), principal)

    def clear(self) -> None:
        with self._lock:
            self.epoch += 1
            self._entries.clear()
            self._refusals.clear()

    def evict(self, key: str) -> None:
        with self._lock:
            self.epoch += 1
            self._entries.pop(key, None)
            self._refusals.pop(key, None)  # a key just created with this secret

    def evict_where(self, predicate: Callable[[Principal], bool]) -> None:
        with self._lock:
            self.epoch += 1
            for key, (_, principal) in list(self._entries.items()):
                if predicate(principal):
                    self._entries.pop(key, None)


class Authenticator:
    def __init__(self, jwt_secret: str, cache: CredentialCache, jwt_ttl_seconds: int = 3600,
                 store: CredentialStore | None = None):
        self._store = store
        self._jwt_secret = jwt_secret
        self._jwt_ttl = jwt_ttl_seconds
        self.cache = cache

    # --- verification ---------------------------------------------------

    def authenticate(self, authorization: str | None, conn_factory: Callable[[], Connection]) -> Principal:
        token = _bearer(authorization)
        if self._store is not None and token.startswith(self._store.key_prefixes):
            cache_key = "key:" + hash_secret(token)
            refused = self.cache.refusal(cache_key)
            if refused is not None:
                raise refused
            # Annotated: a lambda's own type is untyped, and calling it below is checked against this.
            loader: Callable[[], Principal] = lambda: self._load_key(cache_key[4:], conn_factory())  # noqa: E731
        elif token.count(".") == 2:
            claims = self._verify_jwt(token)
            cache_key = f"jwt:{claims['jti']}"
            loader = lambda: self._load_session(claims, conn_factory())  # noqa: E731
        else:
            raise Unauthorized("The bearer credential is not a valid API key or session token.")
        principal = self.cache.get(cache_key)
        if principal is None:
            epoch = self.cache.epoch  # before the read: an eviction during it keeps the result out of the cache
            try:
                principal = loader()
            except Unauthorized as refusal:
                if cache_key.startswith("key:"):  # final until a key with this secret is created
                    self.cache.refuse(cache_key, refusal, epoch)
                raise
            self.cache.put(cache_key, principal, epoch)
        if principal.expires_at is not None and principal.expires_at <= utcnow():
            err = Unauthorized("The credential has expired.")
            err.principal = principal  # for the audit log only; never rendered
            raise err
        return principal

    def _load_key(self, secret_hash: str, conn: Connection) -> Principal:
        key = self._credentials().find_key(Work.on(conn), secret_hash)
        if key is None:
            raise Unauthorized("The API key is invalid or has been revoked.")
        principal = Principal(
            kind="api_key",
            credential_id=key.id,
            org_id=key.org_id,
            workspace_id=key.workspace_id,
            user_id=key.user_id,
            scopes=with_implied(key.scopes),
            role=key.role,
            plan=key.plan,
            is_platform_admin=key.is_platform_admin,
            ip_allowlist=key.ip_allowlist,
            expires_at=key.expires_at,
        )
        if key.revoked_at is not None:
            err = Unauthorized("The API key is invalid or has been revoked.")
            err.principal = principal  # for the audit log only; never rendered
            raise err
        return principal

    def hold(self, principal: Principal, conn: Connection) -> None:
        """Hold the caller's membership (an API key's creator's) in `conn`'s transaction: their erasure locks it
        before it revokes their keys and erases their data, so the transaction runs wholly before the erasure or
        is refused after it, as the caller's next call would be (stages.hold)."""
        if not self._credentials().hold_member(Work.on(conn), principal.org_id, principal.user_id):
            err = Unauthorized("The caller is no longer a member of the organization: their data was erased.")
            err.principal = principal  # for the audit log only; never rendered
            raise err

    def _credentials(self) -> CredentialStore:
        if self._store is None:
            raise RuntimeError("no module implements the credentials port")
        return self._store

    def _verify_jwt(self, token: str) -> SessionClaims:
        import jwt  # here, not at import: PyJWT loads every cryptography algorithm, which runners and workers never use

        try:
            return cast(SessionClaims, jwt.decode(  # signed with our secret: the claims `mint_session` wrote
                token,
                self._jwt_secret,
                algorithms=[JWT_ALGORITHM],
                issuer=JWT_ISSUER,
                options={"require": ["exp", "iat", "sub", "org", "ws", "jti"]},
            ))
        except jwt.ExpiredSignatureError:
            raise Unauthorized("The session token has expired.") from None
        except jwt.PyJWTError:
            raise Unauthorized("The session token is invalid.") from None

    def _load_session(self, claims: SessionClaims, conn: Connection) -> Principal:
        member = self._credentials().find_member(Work.on(conn), claims["org"], claims["sub"], claims["ws"])
        if member is None:
            raise Unauthorized("The session token's user is not a member of its organization.")
        return Principal(
            kind="session",
            credential_id=f"jwt:{claims['jti']}",
            org_id=claims["org"],
            workspace_id=claims["ws"],
            user_id=claims["sub"],
            scopes=session_scopes(member.role, member.is_platform_admin),
            role=member.role,
            plan=member.plan,
            is_platform_admin=member.is_platform_admin,
            expires_at=None,  # PyJWT checks `exp` on every decode
            org_wide=member.all_workspaces,
        )

    # --- issuing ----------------------------------------------------------

    def mint_session(self, user_id: str, org_id: str, workspace_id: str, ttl_seconds: int | None = None) -> str:
        now = utcnow()
        claims = {
            "iss": JWT_ISSUER,
            "sub": user_id,
            "org": org_id,
            "ws": workspace_id,
            "jti": uuid.uuid4().hex,
            "iat": now,
            "exp": now + timedelta(seconds=ttl_seconds or self._jwt_ttl),
        }
        import jwt

        return jwt.encode(claims, self._jwt_secret, algorithm=JWT_ALGORITHM)


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("The Authorization header is missing; send `Authorization: Bearer <API key>`.")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("The Authorization header must be `Bearer <credential>`.")
    return token.strip()


def check_client_address(principal: Principal, client_ip: str | None) -> None:
    """Enforce a key's IP allowlist on the client address Envoy saw."""
    if not principal.ip_allowlist:
        return
    try:
        address = ipaddress.ip_address(client_ip or "")
    except ValueError:
        address = None
    if address is None or not any(address in ipaddress.ip_network(n, strict=False) for n in principal.ip_allowlist):
        raise Forbidden("The API key may not be used from this address.", {"clientIp": client_ip or ""})
