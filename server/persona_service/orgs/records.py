"""Typed records of the orgs module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class OrganizationRecord:
    id: str
    slug: str
    name: str
    region: str
    data_residency_locked: bool
    plan: str
    owner_user_id: str
    created_at: datetime
    workspaces_count: int


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    """An API key as callers see it (never its secret or hash)."""

    id: str
    name: str
    scopes: list[str]
    mode: str
    prefix: str
    ip_allowlist: list[str]
    workspace_id: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class NewKey:
    """An API key or a SCIM token (`purpose`) as it is stored: its secret's hash, never the secret."""

    id: str
    org_id: str
    workspace_id: str
    created_by_user_id: str
    name: str
    scopes: list[str]
    mode: str
    prefix: str
    secret_hash: str
    ip_allowlist: list[str]
    purpose: str
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class HeldMembership:
    """A membership a write holds (FOR SHARE): its organization."""

    org_id: str
