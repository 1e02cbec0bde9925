"""Opaque, tamper-evident page cursors: base64url(JSON) + HMAC-SHA256.

One mechanism for every list. A cursor that was altered, truncated or made
for another list or tenant fails with 400 `bad_request` naming the parameter.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from persona_service.errors import BadRequest


class CursorCodec:
    def __init__(self, secret: str):
        self._key = hmac.new(secret.encode(), b"persona-service cursor v1", hashlib.sha256).digest()

    def _mac(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self._key, payload, hashlib.sha256).digest()[:16]).decode().rstrip("=")

    def encode(self, scope: str, position: list[Any]) -> str:
        payload = json.dumps({"s": scope, "p": position}, separators=(",", ":")).encode()
        body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        return f"{body}.{self._mac(payload)}"

    def decode(self, scope: str, cursor: str, parameter: str) -> list[Any]:
        invalid = BadRequest(f"`{parameter}` is not a cursor this list issued.", {"parameter": parameter})
        try:
            body, mac = cursor.split(".", 1)
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except ValueError:
            raise invalid from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise invalid
        data = json.loads(payload)
        if data.get("s") != scope:
            raise invalid
        return data["p"]
