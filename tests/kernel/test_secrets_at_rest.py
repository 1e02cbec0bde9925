"""No secret sits anywhere in the database in plaintext: not in its own
table (hashes and sealed values only) and not in a stored idempotent
response, the place a create's one-time secret used to linger for 24 h."""

from __future__ import annotations

import uuid

from sqlalchemy import text


def _dump(engine) -> str:
    """Every row of every table, as PostgreSQL renders it (bytea as hex)."""
    with engine.connect() as conn:
        tables = conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars().all()
        return "\n".join(
            row for table in tables for row in conn.execute(text(f'SELECT t::text FROM "{table}" t')).scalars()
        )


def _forms(secret: str) -> list[str]:
    """The secret as text and as the hex PostgreSQL prints for bytes holding it."""
    return [secret, secret.encode().hex()]


def test_created_secrets_are_not_stored_in_plaintext_even_for_idempotent_replays(http, tenant, engine):
    key_headers = {**tenant.auth, "Idempotency-Key": str(uuid.uuid4())}
    key_body = {"name": "at-rest", "scopes": ["personas:read"]}
    made_key = http.post("/v1/keys", headers=key_headers, json=key_body)
    assert made_key.status_code == 200, made_key.text
    api_secret = made_key.json()["secret"]

    hook_headers = {**tenant.auth, "Idempotency-Key": str(uuid.uuid4())}
    hook_body = {"url": "http://127.0.0.1:9/hooks", "events": ["*"]}
    made_hook = http.post("/v1/webhooks", headers=hook_headers, json=hook_body)
    assert made_hook.status_code == 200, made_hook.text
    hook_secret = made_hook.json()["secret"]

    dump = _dump(engine)
    for secret in (api_secret, hook_secret):
        for form in _forms(secret):
            assert form not in dump

    # The sealed outcome still replays byte for byte.
    replay = http.post("/v1/keys", headers=key_headers, json=key_body)
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json() == made_key.json()
    hook_replay = http.post("/v1/webhooks", headers=hook_headers, json=hook_body)
    assert hook_replay.json()["secret"] == hook_secret
