"""API keys: creation (secret shown once), listing and revocation."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime

from persona_service.kernel.api import (
    KEY_SCOPES,
    CursorCodec,
    Forbidden,
    NotFound,
    Principal,
    Scope,
    ValidationFailed,
    Violation,
    Work,
    hash_secret,
    keyset_page,
    new_id,
    utcnow,
)
from persona_service.orgs.keys_repository import API, SCIM, KeyRepository
from persona_service.orgs.records import ApiKeyRecord, NewKey

# Provisioning through SCIM. Not one of the six scopes an API key is given:
# SCIM tokens hold it alone (it confines them to the SCIM endpoints), and
# `config:write` implies it.
SCIM_SCOPE = Scope("scim:provision", implied_by="config:write", confined=True)
# Bearer prefixes of the credentials found by secret hash: API keys, SCIM tokens.
KEY_PREFIXES = ("sk_live_", "sk_test_", "scim_")


def new_secret(mode: str) -> str:
    return f"sk_{mode}_{secrets.token_urlsafe(32)}"


class KeyService:
    """A key's writes begin with the caller's membership held (the pipeline's, kernel.transport.stages.hold): their
    erasure locks it, then revokes the keys they created, so a key made or revoked beside it is made before it (and
    revoked by it) or refused after it (401), as in each serial order, never left live for an erased member."""

    def __init__(self, work: Work, cursors: CursorCodec | None = None) -> None:
        self._repo = work.of(KeyRepository)
        self.cursors = cursors

    def create(
        self, principal: Principal | None, *, org_id: str, workspace_id: str, user_id: str, plan: str,
        name: str, scopes: list[str], mode: str = "live", expires_at: datetime | None = None,
        ip_allowlist: Sequence[str] = (),
    ) -> tuple[ApiKeyRecord, str]:
        """Create a key. `principal` is the caller (None for the bootstrap CLI)."""
        if principal is not None:
            missing = sorted(set(scopes) - principal.scopes)
            if missing:
                raise Forbidden("A key cannot grant scopes its creator does not hold.", {"scopes": missing})
        if ip_allowlist and plan != "enterprise":
            raise Forbidden("IP allowlists are available on the Enterprise plan only.", {"requiredPlan": "enterprise"})
        if expires_at is not None and expires_at <= utcnow():
            raise ValidationFailed([Violation("expiresAt", "future", expires_at.isoformat(), {"after": "now"})])
        mode = mode or "live"
        secret = new_secret(mode)
        # Keep the catalogue order, so the stored list is canonical.
        ordered = [s for s in KEY_SCOPES if s in set(scopes)]
        row = self._repo.create(NewKey(
            id=new_id("api_key"), org_id=org_id, workspace_id=workspace_id, created_by_user_id=user_id,
            name=name, scopes=ordered, mode=mode, prefix=secret[:12], secret_hash=hash_secret(secret),
            ip_allowlist=list(ip_allowlist), purpose=API, expires_at=expires_at,
        ))
        return row, secret

    def get(self, principal: Principal, key_id: str) -> ApiKeyRecord:
        row = self._repo.get(principal.workspace_id, key_id)
        if row is None:
            raise NotFound("API key")
        return row

    def list(self, principal: Principal, limit: int, cursor: str) -> tuple[list[ApiKeyRecord], str]:
        return keyset_page(
            self.cursors, f"keys:{principal.workspace_id}", limit, cursor,
            lambda n, after: self._repo.list_page(principal.workspace_id, n, after), "created_at",
        )

    def revoke(self, principal: Principal, key_id: str) -> tuple[ApiKeyRecord, str | None]:
        """Revoke; returns the key and the hash to evict from credential caches."""
        row = self._repo.revoke(principal.workspace_id, key_id, utcnow())
        if row is None:
            return self.get(principal, key_id), None  # already revoked (or 404)
        return row, self._repo.secret_hash(key_id)


class ScimTokens:
    """SCIM tokens: keys of the organization holding only `scim:provision`
    (stored beside API keys, listed and revoked apart from them)."""

    def __init__(self, work: Work, cursors: CursorCodec | None = None) -> None:
        self._repo = work.of(KeyRepository)
        self.cursors = cursors

    def create(self, principal: Principal, name: str) -> tuple[ApiKeyRecord, str]:
        secret = f"scim_{secrets.token_urlsafe(32)}"
        row = self._repo.create(NewKey(
            id=new_id("api_key"), org_id=principal.org_id, workspace_id=principal.workspace_id,
            created_by_user_id=principal.user_id, name=name, scopes=[SCIM_SCOPE.name], mode="live", prefix=secret[:12],
            secret_hash=hash_secret(secret), ip_allowlist=[], purpose=SCIM,
        ))
        return row, secret

    def list(self, principal: Principal, limit: int, cursor: str) -> tuple[list[ApiKeyRecord], str]:
        return keyset_page(
            self.cursors, f"scim-tokens:{principal.org_id}", limit, cursor,
            lambda n, after: self._repo.list_page("", n, after, org_id=principal.org_id, purpose=SCIM), "created_at",
        )

    def revoke(self, principal: Principal, token_id: str) -> tuple[ApiKeyRecord, str | None]:
        """Revoke; returns the token and the hash to evict from credential caches."""
        row = self._repo.revoke("", token_id, utcnow(), org_id=principal.org_id, purpose=SCIM)
        if row is not None:
            return row, self._repo.secret_hash(token_id)
        existing = self._repo.get_token(principal.org_id, token_id)
        if existing is None:
            raise NotFound("SCIM token")
        return existing, None
