"""Webhook signatures: `t=<unix>,v1=<hex hmac-sha256 of "<t>.<raw body>">`, and
optionally Standard Webhooks' `webhook-*` headers (standardwebhooks.com)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterable

SIGNATURE_HEADER = "X-Service-Signature"
DEFAULT_TOLERANCE_SECONDS = 300


def sign(payload: bytes, secret: str, timestamp: int) -> str:
    """The hex HMAC-SHA256 of `<timestamp>.<payload>` under `secret`."""
    message = str(int(timestamp)).encode() + b"." + payload
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(payload: bytes, secrets: Iterable[str], timestamp: int) -> str:
    """The header value: one `v1` per secret, in the order given (current first)."""
    parts = [f"t={int(timestamp)}"] + [f"v1={sign(payload, s, timestamp)}" for s in secrets]
    return ",".join(parts)


def verify_signature(
    payload: bytes, header: str, secrets: list[str], tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> bool:
    """True when `header` carries a `v1` signature of `payload` under any of
    `secrets` and its `t` is within `tolerance_seconds` of `now` (default: the
    current time). `payload` must be the raw request body, byte for byte.
    Every candidate is compared in constant time."""
    if not header or not secrets:
        return False
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
                return False
        elif key == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        return False
    current = time.time() if now is None else now
    if tolerance_seconds is not None and abs(current - timestamp) > tolerance_seconds:
        return False
    matched = False
    for secret in secrets:
        expected = sign(payload, secret, timestamp).encode()
        for candidate in signatures:
            # No early exit: the time taken does not depend on which matched.
            matched |= hmac.compare_digest(expected, candidate.encode())
    return matched


def standard_webhook_headers(payload: bytes, secrets: Iterable[str], message_id: str, timestamp: int) -> dict[str, str]:
    """Standard Webhooks' headers: `webhook-signature` is `v1,<base64 HMAC-SHA256 of
    "<id>.<timestamp>.<payload>">` per secret (space-separated), keyed with the
    base64-decoded part after `whsec_`, as its reference libraries read it."""
    message = f"{message_id}.{int(timestamp)}.".encode() + payload
    signatures = [
        "v1," + base64.b64encode(hmac.new(_standard_key(s), message, hashlib.sha256).digest()).decode()
        for s in secrets
    ]
    return {"webhook-id": message_id, "webhook-timestamp": str(int(timestamp)), "webhook-signature": " ".join(signatures)}


def _standard_key(secret: str) -> bytes:
    # As the reference library reads it: lenient, padding added. For a secret made
    # before secrets were standard base64 (URL-safe alphabet) that drops `-` and `_`;
    # such endpoints should rotate their secret before receivers use other libraries.
    return base64.b64decode(secret.removeprefix("whsec_") + "==")
