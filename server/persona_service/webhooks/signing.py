"""Webhook signatures: `t=<unix>,v1=<hex hmac-sha256 of "<t>.<raw body>">`, and
optionally Standard Webhooks' `webhook-*` headers (standardwebhooks.com)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable

SIGNATURE_HEADER = "X-Service-Signature"


def sign(payload: bytes, secret: str, timestamp: int) -> str:
    """The hex HMAC-SHA256 of `<timestamp>.<payload>` under `secret`."""
    message = str(int(timestamp)).encode() + b"." + payload
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(payload: bytes, secrets: Iterable[str], timestamp: int) -> str:
    """The header value: one `v1` per secret, in the order given (current first)."""
    parts = [f"t={int(timestamp)}"] + [f"v1={sign(payload, s, timestamp)}" for s in secrets]
    return ",".join(parts)


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
