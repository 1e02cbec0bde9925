"""Resource ids: a type prefix and a cuid2 (`org_…`, `ws_…`, `chs_…`).

cuid2 is collision-resistant across processes and hosts without
coordination, and the prefix makes an id's type readable in logs and lets
the API reject an id of the wrong type cheaply.
"""

from __future__ import annotations

from cuid2 import Cuid

_cuid = Cuid(length=24)

PREFIXES = {
    "org": "org",
    "workspace": "ws",
    "user": "usr",
    "api_key": "key",
    "chat_session": "chs",
    "chat_message": "msg",
    "event": "evt",
    "invoice": "inv",
    "request": "req",
    "audit_event": "aud",
    "generation_run": "run",
    "moderation_review": "mod",
    "webhook_endpoint": "whe",
    "webhook_delivery": "whd",
}


def new_id(kind: str) -> str:
    return f"{PREFIXES[kind]}_{_cuid.generate()}"


def has_prefix(kind: str, value: str) -> bool:
    return value.startswith(PREFIXES[kind] + "_")
