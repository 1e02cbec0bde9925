"""A claimed Idempotency-Key whose call failed because PostgreSQL was away
(scripts/topology.py: a PgBouncer or PostgreSQL restart) is released once
PostgreSQL is back, so the client's retry with the same key proceeds instead
of being refused `in_flight` until the claim's lock runs out (5 minutes)."""

from __future__ import annotations

import time
import uuid

from cryptography.fernet import Fernet
from persona_service.kernel.errors import IdempotencyConflict
from persona_service.kernel.idempotency import Idempotency
from persona_service.kernel.principal import Principal
from persona_service.kernel.secretbox import SecretBox
from sqlalchemy.exc import OperationalError


def test_a_release_postgresql_refused_is_retried_until_it_is_back(engine, tenants, monkeypatch):
    t = tenants()
    caller = Principal("api_key", f"key_{uuid.uuid4().hex[:12]}", t.org_id, t.workspace_id, t.user_id, frozenset(),
                       None, t.plan, False)
    idempotency = Idempotency(engine, SecretBox(Fernet.generate_key().decode()))
    key = str(uuid.uuid4())
    claim, replay = idempotency.begin(caller, key, "/persona.v1.PersonaService/CreatePersona", "digest")
    assert replay is None

    release = Idempotency._release
    refusals = [OperationalError("UPDATE idempotency_keys", {}, Exception("server closed the connection"))]

    def away_once(self, claim):
        if refusals:
            raise refusals.pop()
        release(self, claim)

    monkeypatch.setattr(Idempotency, "_release", away_once)
    idempotency.release(claim)  # the call's own 503 goes out; the release is not lost

    deadline = time.monotonic() + 10
    while True:
        try:
            _, replay = idempotency.begin(caller, key, "/persona.v1.PersonaService/CreatePersona", "digest")
            break
        except IdempotencyConflict as conflict:
            assert time.monotonic() < deadline, conflict
            time.sleep(0.1)
    assert replay is None and not refusals
