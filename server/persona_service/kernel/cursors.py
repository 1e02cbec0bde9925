"""Opaque, tamper-evident page cursors: base64url(JSON) + HMAC-SHA256.

One mechanism for every list. A cursor that was altered, truncated or made
for another list or tenant fails with 400 `bad_request` naming the parameter.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import datetime
from typing import Any

from persona_service.kernel.errors import BadRequest


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
        if not hmac.compare_digest(mac.encode(), self._mac(payload).encode()):
            raise invalid
        data = json.loads(payload)
        if data.get("s") != scope:
            raise invalid
        return data["p"]


DEFAULT_PAGE_SIZE = 20


def keyset_page(
    codec: CursorCodec | None, scope: str, page_size: int, page_token: str, fetch, time_column: str, parameter: str = "pageToken"
):
    """One page of a newest-first list keyset-paginated on (time, id): stable
    under concurrent inserts (a new row never shifts a later page).

    `fetch(limit, after)` returns records (with `id` and the time field) ordered by (time, id) descending,
    strictly after `after` = (time, id) when given. Returns (rows, next token)."""
    if codec is None:
        raise RuntimeError("a listing needs the cursor codec")
    limit = page_size or DEFAULT_PAGE_SIZE
    after = None
    if page_token:
        position = codec.decode(scope, page_token, parameter)
        try:
            after = (datetime.fromisoformat(position[0]), str(position[1]))
        except (TypeError, ValueError, IndexError):
            raise BadRequest(f"`{parameter}` is not a cursor this list issued.", {"parameter": parameter}) from None
    rows = fetch(limit + 1, after)
    if len(rows) <= limit:
        return rows, ""
    rows = rows[:limit]
    last = rows[-1]
    return rows, codec.encode(scope, [getattr(last, time_column).isoformat(), last.id])
