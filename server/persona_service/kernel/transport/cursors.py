"""Opaque, tamper-evident page cursors: base64url(JSON) + HMAC-SHA256.

One mechanism for every list. A cursor that was altered, truncated or made
for another list or tenant fails with 400 `bad_request` naming the parameter.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar, cast

from persona_service.kernel.errors import BadRequest


def _invalid() -> BadRequest:
    return BadRequest("`cursor` is not a cursor this list issued.", {"parameter": "cursor"})


class CursorCodec:
    def __init__(self, secret: str):
        self._key = hmac.new(secret.encode(), b"persona-service cursor v1", hashlib.sha256).digest()

    def _mac(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self._key, payload, hashlib.sha256).digest()[:16]).decode().rstrip("=")

    def encode(self, scope: str, position: Sequence[object]) -> str:
        payload = json.dumps({"s": scope, "p": position}, separators=(",", ":")).encode()
        body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        return f"{body}.{self._mac(payload)}"

    def decode(self, scope: str, cursor: str) -> list[object]:
        invalid = _invalid()
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
        return list(data["p"])


DEFAULT_PAGE_SIZE = 20

Row = TypeVar("Row")
After = TypeVar("After")
# A record's sort key holds JSON scalars: a decoded cursor gives them back as they were.
Position = TypeVar("Position", bound=str | int | float | bool | None)


class Keyed(Protocol):
    @property
    def id(self) -> str: ...


KeyedRow = TypeVar("KeyedRow", bound=Keyed)


def cursor_page(codec: CursorCodec | None, scope: str, limit: int, cursor: str,
                fetch: Callable[[int, After | None], list[Row]], position: Callable[[Row], list[Position]],
                parse: Callable[[list[Position]], After]) -> tuple[list[Row], str]:
    """One page of any list (docs/contract-decisions.md: one list style):
    `limit` (0: the default, 20; the proto bounds it to 1..100), an opaque
    `cursor` and the next page's cursor, empty on the last page.

    `fetch(n, after)` returns up to n records in list order, strictly after
    `after` (None for the first page); `position(record)` is a record's
    JSON-able sort key and `parse(position)` turns a decoded one back into
    `after` (raising TypeError/ValueError/IndexError when it is not one)."""
    if codec is None:
        raise RuntimeError("a listing needs the cursor codec")
    limit = limit or DEFAULT_PAGE_SIZE
    after = None
    if cursor:
        try:
            # Its MAC proves the position is one `position` made for this list (JSON keeps a scalar's type).
            after = parse(cast("list[Position]", codec.decode(scope, cursor)))
        except (TypeError, ValueError, IndexError):
            raise _invalid() from None
    rows = fetch(limit + 1, after)
    if len(rows) <= limit:
        return rows, ""
    rows = rows[:limit]
    return rows, codec.encode(scope, position(rows[-1]))


def keyset_page(codec: CursorCodec | None, scope: str, limit: int, cursor: str,
                fetch: Callable[[int, tuple[datetime, str] | None], list[KeyedRow]],
                time_column: str) -> tuple[list[KeyedRow], str]:
    """One page of a newest-first list keyset-paginated on (time, id): stable
    under concurrent inserts (a new row never shifts a later page).

    `fetch(limit, after)` returns records (with `id` and the time field) ordered by (time, id) descending,
    strictly after `after` = (time, id) when given. Returns (rows, next cursor)."""
    return cursor_page(
        codec, scope, limit, cursor, fetch,
        lambda row: [getattr(row, time_column).isoformat(), row.id],
        lambda position: (datetime.fromisoformat(position[0]), str(position[1])),
    )
