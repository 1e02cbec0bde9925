"""Typed records of the SCIM module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from persona_service.scim.json_support import JSONObject


@dataclass(frozen=True, slots=True)
class ScimRecord:
    """A stored User or Group: its canonical document and version."""

    id: str
    document: JSONObject
    version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class UserFields:
    """What a create or a replace of a user stores: its document, with the attributes filters hit most beside it."""

    user_name: str
    external_id: str | None
    display_name: str | None
    active: bool
    document: JSONObject


@dataclass(frozen=True, slots=True)
class GroupFields:
    """What a create or a replace of a group stores: its document, with the attributes filters hit most beside it."""

    display_name: str
    external_id: str | None
    document: JSONObject


@dataclass(frozen=True, slots=True)
class GroupRef:
    """A group a user is in (the user's readOnly `groups`)."""

    user_id: str
    group_id: str
    display_name: str


@dataclass(frozen=True, slots=True)
class Grant:
    """What one mapped group grants its members."""

    role: str
    workspace_id: str | None
