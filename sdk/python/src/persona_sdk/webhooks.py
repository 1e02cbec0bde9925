"""Verifying webhook deliveries.

Each delivery is POSTed with `X-Service-Signature: t=<unix>,v1=<hex>`: the
hex HMAC-SHA256, keyed with the whole endpoint secret (`whsec_…`, UTF-8), of
`<t>.<raw body>`. During a secret rotation's grace there is one `v1=` per
valid secret, so a receiver that knows both (current and previous) accepts
either. Verify the raw body, byte for byte, before parsing it:

    from persona_sdk import webhooks

    event = webhooks.construct_event(request.body, request.headers["X-Service-Signature"], secret)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Sequence

from ._errors import WebhookVerificationError
from ._models import parse
from .types import Event

SIGNATURE_HEADER = "X-Service-Signature"
DEFAULT_TOLERANCE_SECONDS = 300

__all__ = ["DEFAULT_TOLERANCE_SECONDS", "SIGNATURE_HEADER", "construct_event", "sign", "signature_header", "verify"]


def _bytes(payload: bytes | str) -> bytes:
    return payload.encode() if isinstance(payload, str) else bytes(payload)


def sign(payload: bytes | str, secret: str, timestamp: int) -> str:
    """The hex HMAC-SHA256 of `<timestamp>.<payload>` under `secret` (one `v1` value)."""
    message = str(int(timestamp)).encode() + b"." + _bytes(payload)
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(payload: bytes | str, secrets: str | Sequence[str], timestamp: int | None = None) -> str:
    """A header value as the service writes it (for a receiver's tests): one `v1` per secret."""
    at = int(time.time() if timestamp is None else timestamp)
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    return ",".join([f"t={at}"] + [f"v1={sign(payload, s, at)}" for s in keys])


def _failure(payload: bytes | str, header: str | None, secrets: str | Sequence[str], tolerance: int | None,
             now: float | None) -> str | None:
    """Why the delivery does not verify, or None when it does."""
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    if not header:
        return "no signature header"
    if not keys:
        return "no secret to verify with"
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            continue
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError:
                return "the timestamp is not an integer"
        elif key == "v1":
            signatures.append(value)
    if timestamp is None:
        return "the header has no timestamp"
    if not signatures:
        return "the header has no v1 signature"
    current = time.time() if now is None else now
    if tolerance is not None and abs(current - timestamp) > tolerance:
        return f"the timestamp is more than {tolerance} s away from now"
    matched = False
    for secret in keys:
        expected = sign(payload, secret, timestamp).encode()
        for candidate in signatures:
            # Every pair is compared, in constant time: how long it takes says nothing of which matched.
            matched |= hmac.compare_digest(expected, candidate.encode())
    return None if matched else "no signature matches"


def verify(payload: bytes | str, header: str | None, secrets: str | Sequence[str],
           tolerance: int | None = DEFAULT_TOLERANCE_SECONDS, now: float | None = None) -> bool:
    """True when `header` (X-Service-Signature) carries a `v1` signature of the raw
    `payload` under any of `secrets` (one secret, or the current and previous
    during a rotation) and its `t` is within `tolerance` seconds of `now`
    (default: the current time; None: no time check)."""
    return _failure(payload, header, secrets, tolerance, now) is None


def construct_event(payload: bytes | str, header: str | None, secrets: str | Sequence[str],
                    tolerance: int | None = DEFAULT_TOLERANCE_SECONDS, now: float | None = None) -> Event:
    """The verified event, an `Event` (`id`, `type`, `occurred_at`, `org_id`, `workspace_id`, `data`,
    as `client.events.get` answers it); raises WebhookVerificationError when the signature, the
    timestamp or the body is wrong."""
    reason = _failure(payload, header, secrets, tolerance, now)
    if reason is not None:
        raise WebhookVerificationError(f"Webhook signature verification failed: {reason}.")
    try:
        event = json.loads(_bytes(payload))
    except ValueError as exc:
        raise WebhookVerificationError("The webhook body is not JSON.") from exc
    if not isinstance(event, dict):
        raise WebhookVerificationError("The webhook body is not a JSON object.")
    return parse(Event, event)
