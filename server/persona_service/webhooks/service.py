"""Webhook endpoints: subscriptions, destination checks (SSRF), secrets and
their rotation, deliveries and replays, test pings.

The delivery rules (schedule, success, dead-lettering) live here too; the
worker (`persona_service.webhooks.worker`) applies them.
"""

from __future__ import annotations

import base64
import builtins
import ipaddress
import secrets as _secrets
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from persona_service.kernel.api import (
    EVENT_TYPES,
    CursorCodec,
    NotFound,
    Outbox,
    Principal,
    SecretBox,
    StateConflict,
    ValidationFailed,
    Violation,
    Work,
    keyset_page,
    new_id,
    utcnow,
)
from persona_service.webhooks.http import resolve_host
from persona_service.webhooks.records import (
    AttemptRecord,
    DeliveryRecord,
    DueDelivery,
    EndpointChanges,
    EndpointRecord,
    EndpointSecrets,
    NewDelivery,
    NewEndpoint,
    SecretRotation,
)
from persona_service.webhooks.repository import WebhookRepository

ALL_EVENTS = "*"
TEST_PING = "webhook.endpoint.test_ping"
# Delays before each retry, after the previous attempt failed: 1 min, 2 min,
# 5 min, 30 min, 2 h. One first attempt + five retries = six attempts; the
# delivery is dead-lettered when the sixth fails.
RETRY_SCHEDULE_SECONDS = (60, 120, 300, 1800, 7200)
MAX_ATTEMPTS = 1 + len(RETRY_SCHEDULE_SECONDS)
# A receiver's Retry-After is honoured when longer than the schedule, up to this.
RETRY_AFTER_CAP_SECONDS = 86400
DELIVERY_TIMEOUT_SECONDS = 10.0
RESPONSE_BODY_LIMIT = 1024
MAX_URL_LENGTH = 2048


def new_secret() -> str:
    """`whsec_` + standard base64 of 32 random bytes: the form Standard Webhooks
    libraries decode into their HMAC key (our own signature uses the whole string)."""
    return "whsec_" + base64.b64encode(_secrets.token_bytes(32)).decode()


# --- destinations (SSRF) -------------------------------------------------------

class DestinationRefused(Exception):
    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


Resolver = Callable[[str, int], list[str]]


# IPv6 ranges that embed or translate to an IPv4 address (a way to reach
# 127.0.0.1 or 169.254.169.254 through a global-looking IPv6 literal):
# IPv4-compatible, IPv4-translated (SIIT), NAT64 (well-known and local-use
# prefixes), Teredo and 6to4. All are refused whatever the embedded address.
_EMBEDDING_IPV4 = tuple(ipaddress.ip_network(n) for n in (
    "::/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "2001::/32", "2002::/16",
))


def refused_address(address: str) -> bool:
    """Loopback, private, link-local (cloud metadata 169.254.169.254,
    fd00:ec2::254), shared (100.64/10), multicast, reserved, unspecified,
    IPv6 forms embedding an IPv4 address: anything not plainly globally
    routable."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif any(ip in network for network in _EMBEDDING_IPV4):
            return True
    return not ip.is_global or ip.is_multicast


def check_destination(url: str, *, allow_private: bool, resolve: Resolver = resolve_host,
                      unresolvable_ok: bool = False) -> None:
    """Raise DestinationRefused unless `url` is an acceptable webhook target:
    `https` with a host, no credentials, every resolved address global.
    `allow_private` (local development, tests) also accepts `http` and
    private addresses. `unresolvable_ok` (registration: a hook is often
    registered before its DNS exists) accepts a host that does not resolve
    yet; the check at connect time still governs every delivery."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise DestinationRefused("malformed_url") from None
    if parts.scheme not in (("https", "http") if allow_private else ("https",)):
        raise DestinationRefused("https_required")
    host = parts.hostname
    if not host:
        raise DestinationRefused("malformed_url")
    if parts.username or parts.password:
        raise DestinationRefused("credentials_in_url")
    if allow_private:
        return
    try:
        vetted_addresses(host, port or (443 if parts.scheme == "https" else 80), allow_private=False, resolve=resolve)
    except DestinationRefused as refused:
        if not (unresolvable_ok and refused.reason == "unresolvable_host"):
            raise


def vetted_addresses(host: str, port: int, *, allow_private: bool, resolve: Resolver = resolve_host) -> builtins.list[str]:
    """The addresses `host` may be reached at: all of its resolved addresses,
    none of them refused (else DestinationRefused). Delivery connects to
    exactly these, so DNS cannot change the answer after the check."""
    try:
        addresses = [host] if _is_ip(host) else resolve(host, port)
    except OSError:
        raise DestinationRefused("unresolvable_host") from None
    if not addresses:
        raise DestinationRefused("unresolvable_host")
    if not allow_private and any(refused_address(a) for a in addresses):
        raise DestinationRefused("private_address")
    return addresses


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def url_violation(url: str, *, allow_private: bool, resolve: Resolver = resolve_host) -> Violation | None:
    """The registration-time check (create, update): a host that does not
    resolve yet is accepted; delivery re-checks at connect time."""
    if len(url) > MAX_URL_LENGTH:
        return Violation("url", "max_length", url[:200] + "…", {"maxLength": MAX_URL_LENGTH, "unit": "characters"})
    try:
        check_destination(url, allow_private=allow_private, resolve=resolve, unresolvable_ok=True)
    except DestinationRefused as refused:
        return Violation("url", refused.reason, url, {"scheme": "https", "address": "public"})
    return None


# --- delivery rules -----------------------------------------------------------------

def retry_delay(attempts_made: int, retry_after: float | None = None) -> float | None:
    """Seconds until the next attempt after `attempts_made` failed attempts,
    or None when the delivery is to be dead-lettered."""
    if attempts_made >= MAX_ATTEMPTS:
        return None
    delay = float(RETRY_SCHEDULE_SECONDS[attempts_made - 1])
    if retry_after is not None and retry_after > delay:
        delay = min(retry_after, RETRY_AFTER_CAP_SECONDS)
    return delay


def valid_secrets(row: EndpointRecord | DueDelivery, box: SecretBox, now: datetime) -> builtins.list[str]:
    """The secrets deliveries are signed with: the current one, then the
    previous one while its grace lasts."""
    result = [box.open(row.secret_enc)]
    if row.previous_secret_enc and row.previous_secret_expires_at and row.previous_secret_expires_at > now:
        result.append(box.open(row.previous_secret_enc))
    return result


@dataclass(frozen=True)
class RotationResult:
    endpoint_id: str
    org_id: str
    outcome: str  # rotated | current
    secret_created_at: datetime
    previous_secret_expires_at: datetime | None


# --- the service ---------------------------------------------------------------------

class WebhookService:
    def __init__(self, work: Work, cursors: CursorCodec | None = None, box: SecretBox | None = None, *,
                 allow_private: bool = False, resolve: Resolver = resolve_host) -> None:
        self.work = work
        self._repo = work.of(WebhookRepository)
        self.cursors = cursors
        self._box = box
        self.allow_private = allow_private
        self.resolve = resolve

    @property
    def box(self) -> SecretBox:
        """The secret box (operations that seal or open secrets need one)."""
        if self._box is None:
            raise RuntimeError("this webhook operation needs the secret box")
        return self._box

    # endpoints

    def create(self, principal: Principal, *, url: str, events: builtins.list[str], description: str = "",
               enabled: bool = True, standard_webhooks: bool = False) -> tuple[EndpointRecord, str]:
        self._check(url=url, events=events)
        secret = new_secret()
        now = utcnow()
        row = self._repo.create(NewEndpoint(
            id=new_id("webhook_endpoint"), org_id=principal.org_id, workspace_id=principal.workspace_id,
            url=url, description=description, events=self._normalize(events), enabled=enabled,
            standard_webhooks=standard_webhooks,
            secret_enc=self.box.seal(secret), secret_created_at=now, created_at=now, updated_at=now,
        ))
        return row, secret

    def get(self, principal: Principal, endpoint_id: str, *, for_update: bool = False) -> EndpointRecord:
        row = self._repo.get(principal.workspace_id, endpoint_id, for_update=for_update)
        if row is None:
            raise NotFound("webhook endpoint")
        return row

    def secrets(self, principal: Principal, endpoint_id: str, now: datetime | None = None) -> EndpointSecrets:
        """The current secret and, while its grace lasts, the previous one."""
        row = self.get(principal, endpoint_id)
        now = now or utcnow()
        current, *previous = valid_secrets(row, self.box, now)
        return EndpointSecrets(
            current, row.secret_created_at, previous[0] if previous else "",
            row.previous_secret_expires_at if previous else None,
        )

    def update(self, principal: Principal, endpoint_id: str, *, url: str | None = None, events: builtins.list[str] | None = None,
               description: str | None = None, enabled: bool | None = None,
               standard_webhooks: bool | None = None) -> EndpointRecord:
        # Locked: a DELETE at the same moment either waits for this update or
        # removed the row first, and then this answers 404 as if it ran after it.
        current = self.get(principal, endpoint_id, for_update=True)
        self._check(url=url, events=events or None)
        changes = EndpointChanges(url=url, events=self._normalize(events) if events else None,
                                  description=description, enabled=enabled, standard_webhooks=standard_webhooks)
        if changes == EndpointChanges():
            return current
        return self._repo.update(principal.workspace_id, endpoint_id, changes, utcnow())

    def delete(self, principal: Principal, endpoint_id: str) -> str:
        if not self._repo.delete(principal.workspace_id, endpoint_id):
            raise NotFound("webhook endpoint")
        return endpoint_id

    def list(self, principal: Principal, cursor: str, limit: int) -> tuple[builtins.list[EndpointRecord], str]:
        return keyset_page(
            self.cursors, f"webhooks:{principal.workspace_id}", limit, cursor,
            lambda n, after: self._repo.list_page(principal.workspace_id, n, after), "created_at",
        )

    def ping(self, principal: Principal, endpoint_id: str) -> str:
        """A test ping through the outbox; the fan-out routes it to this endpoint only."""
        self.get(principal, endpoint_id, for_update=True)
        return Outbox(self.work).emit(TEST_PING, principal.org_id, principal.workspace_id, {"endpointId": endpoint_id})

    # deliveries

    def deliveries(self, principal: Principal, endpoint_id: str, status: str, cursor: str, limit: int
                   ) -> tuple[builtins.list[tuple[DeliveryRecord, builtins.list[AttemptRecord]]], str]:
        self.get(principal, endpoint_id)
        rows, token = keyset_page(
            self.cursors, f"webhook-deliveries:{endpoint_id}:{status}", limit, cursor,
            lambda n, after: self._repo.deliveries_page(endpoint_id, status, n, after), "created_at",
        )
        attempts = self._repo.attempts_for([r.id for r in rows])
        return [(r, attempts.get(r.id, [])) for r in rows], token

    def replay(self, principal: Principal, endpoint_id: str, delivery_id: str, now: datetime | None = None
               ) -> tuple[DeliveryRecord, builtins.list[AttemptRecord]]:
        """A new delivery of the same event (same envelope `id`), due now. The endpoint is locked first:
        a DELETE at the same moment either waits for the replay or removed it, and then this is a 404."""
        self.get(principal, endpoint_id, for_update=True)
        original = self._repo.get_delivery(endpoint_id, delivery_id)
        if original is None:
            raise NotFound("webhook delivery")
        if not self._repo.event_kept(original.event_id):  # a delivery is sent with its event's payload
            raise StateConflict("The delivery's event is older than the event log keeps: it cannot be replayed.",
                                "eventId", {"eventId": original.event_id})
        now = now or utcnow()
        row = self._repo.add_delivery(NewDelivery(
            id=new_id("webhook_delivery"), endpoint_id=endpoint_id, event_id=original.event_id,
            event_type=original.event_type, next_attempt_at=now, created_at=now, replay_of=original.id,
        ))
        return row, []

    # rotation (platform admin)

    def rotate_secrets(self, *, max_age_seconds: int, grace_seconds: int, now: datetime | None = None) -> builtins.list[RotationResult]:
        now = now or utcnow()
        cutoff = now - timedelta(seconds=max_age_seconds)
        results = []
        for row in self._repo.all_for_rotation():
            if row.secret_created_at <= cutoff:
                expires = now + timedelta(seconds=grace_seconds)
                self._repo.rotate(row.id, SecretRotation(
                    secret_enc=self.box.seal(new_secret()), secret_created_at=now,
                    previous_secret_enc=row.secret_enc, previous_secret_expires_at=expires, updated_at=now,
                ))
                results.append(RotationResult(row.id, row.org_id, "rotated", now, expires))
            else:
                previous_expires = row.previous_secret_expires_at
                results.append(RotationResult(
                    row.id, row.org_id, "current", row.secret_created_at,
                    previous_expires if previous_expires is not None and previous_expires > now else None,
                ))
        return results

    # rules

    def _check(self, *, url: str | None, events: builtins.list[str] | None) -> None:
        violations = []
        if url is not None:
            violation = url_violation(url, allow_private=self.allow_private, resolve=self.resolve)
            if violation is not None:
                violations.append(violation)
        if events is not None:
            for i, event_type in enumerate(events):
                if event_type != ALL_EVENTS and event_type not in EVENT_TYPES:
                    violations.append(Violation(f"events[{i}]", "one_of", event_type, {"oneOf": ["*", *sorted(EVENT_TYPES)]}))
            if ALL_EVENTS in events and len(events) > 1:
                violations.append(Violation("events", "exclusive", events, {"exclusive": ALL_EVENTS}))
        if violations:
            raise ValidationFailed(violations)

    @staticmethod
    def _normalize(events: builtins.list[str]) -> builtins.list[str]:
        return [ALL_EVENTS] if ALL_EVENTS in events else sorted(set(events))
