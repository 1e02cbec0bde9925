"""Typed records of the webhooks module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class EndpointRecord:
    id: str
    org_id: str
    workspace_id: str
    url: str
    description: str
    events: list[str]
    enabled: bool
    standard_webhooks: bool
    secret_enc: str  # sealed by the secret box; opened only to sign
    secret_created_at: datetime
    previous_secret_enc: str | None
    previous_secret_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class NewEndpoint:
    id: str
    org_id: str
    workspace_id: str
    url: str
    description: str
    events: list[str]
    enabled: bool
    standard_webhooks: bool
    secret_enc: str
    secret_created_at: datetime
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class EndpointChanges:
    """What an edit of an endpoint sets besides `updated_at` (None: left as it is)."""

    url: str | None = None
    events: list[str] | None = None
    description: str | None = None
    enabled: bool | None = None
    standard_webhooks: bool | None = None


@dataclass(frozen=True, slots=True)
class SecretRotation:
    """A rotation's new secret; the one it replaces stays valid until `previous_secret_expires_at`."""

    secret_enc: str
    secret_created_at: datetime
    previous_secret_enc: str
    previous_secret_expires_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class EndpointSecrets:
    """The current secret and, while its grace lasts, the previous one."""

    secret: str
    secret_created_at: datetime
    previous_secret: str
    previous_secret_expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    status: str  # pending | succeeded | dead_lettered
    attempt_count: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    replay_of: str | None
    created_at: datetime
    completed_at: datetime | None


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A delivery due at `next_attempt_at` (a replay names the delivery it repeats)."""

    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    next_attempt_at: datetime
    created_at: datetime
    replay_of: str | None = None
    status: str = "pending"
    attempt_count: int = 0


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    delivery_id: str
    attempt: int
    attempted_at: datetime
    status_code: int
    latency_ms: int
    response_body: str
    error: str
    success: bool


@dataclass(frozen=True, slots=True)
class DeliveryOutcome:
    """A delivery's state after an attempt: due again at `next_attempt_at`, or completed."""

    id: str
    status: str  # pending | succeeded | dead_lettered
    attempt_count: int
    next_attempt_at: datetime | None
    last_status_code: int | None
    completed_at: datetime | None


@dataclass(frozen=True, slots=True)
class Subscription:
    """One delivery the fan-out owes: an event to an endpoint."""

    event_id: str
    event_type: str
    endpoint_id: str
    occurred_at: datetime  # the event's: the delivery's created_at (its partition key, migration 0034)


@dataclass(frozen=True, slots=True)
class DueDelivery:
    """A claimed delivery with what sending it needs: its event and its endpoint."""

    id: str
    endpoint_id: str
    attempt_count: int
    event_id: str
    type: str
    occurred_at: datetime
    org_id: str
    workspace_id: str
    data: dict[str, object]  # the event's JSON column: an object
    url: str
    standard_webhooks: bool
    secret_enc: str
    previous_secret_enc: str | None
    previous_secret_expires_at: datetime | None
