"""One setting's rows read prepared (config/repository.py `key_settings`, issue 50: the drift threshold a chat
reply acts by, without SQLAlchemy's per-execution layers): the same rows as `settings(key=...)`, at every level,
and the effective value the levels give (persona → workspace → org → default). A server process keeps an
organization's rows of a key in memory: a reply acts by the setting written just before it, whichever process
served the write."""

from __future__ import annotations

import math
import uuid

import pytest
from persona_service.config import repository
from persona_service.config.repository import ORG_LEVEL, ConfigRepository, persona_level
from persona_service.config.service import ConfigService
from persona_service.kernel.data import read_cache
from persona_service.kernel.data.work import Work
from persona_service.kernel.principal import Principal
from sqlalchemy import event

THRESHOLD = "engine.pipeline.drift_detection.threshold"


def test_a_keys_rows_read_prepared_are_settings_rows(engine, tenant):
    principal = Principal("api_key", "key_1", tenant.org_id, tenant.workspace_id, tenant.user_id, frozenset(),
                          "owner", tenant.plan, False)
    persona, other = str(uuid.uuid4()), str(uuid.uuid4())
    with engine.connect() as conn:
        repo, config = ConfigRepository(conn), ConfigService(Work.on(conn))
        default = config.value(principal, THRESHOLD, persona)
        levels = [(ORG_LEVEL, 0.5), (tenant.workspace_id, 0.6), (persona_level(persona), 0.7),
                  (persona_level(other), 0.9), ("another-workspace", 0.95)]
        for level, value in levels:
            repo.upsert(tenant.org_id, level, THRESHOLD, value, "test")
        repo.upsert(tenant.org_id, ORG_LEVEL, "engine.pipeline.drift_detection.action_on_alert", "block", "test")
        statements: list[str] = []
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        for persona_id in (persona, ""):
            prepared = repo.key_settings(tenant.org_id, tenant.workspace_id, THRESHOLD, persona_id)
            assert statements == []  # not through SQLAlchemy
            core = repo.settings(tenant.org_id, tenant.workspace_id, key=THRESHOLD, persona_id=persona_id)
            statements.clear()
            assert sorted(prepared, key=lambda r: r.workspace_id) == sorted(core, key=lambda r: r.workspace_id)
            assert len(prepared) == (3 if persona_id else 2)
        assert config.value(principal, THRESHOLD, persona) == 0.7
        assert config.value(principal, THRESHOLD) == 0.6
        repo.delete(tenant.org_id, tenant.workspace_id, THRESHOLD)
        assert config.value(principal, THRESHOLD) == 0.5
        repo.delete(tenant.org_id, ORG_LEVEL, THRESHOLD)
        assert config.value(principal, THRESHOLD) == default
        conn.rollback()


def test_a_reply_acts_by_the_threshold_written_just_before_it(http, tenant):
    """Every server process has read (and keeps) the threshold before each write; each write must reach them all
    before it answers, or a reply served by another process would act by the old value."""
    persona = http.post("/v1/personas", json={"intent": "A witty pilot"}, headers=tenant.auth).json()["id"]
    session = http.post("/v1/chat/sessions", json={"personaId": persona}, headers=tenant.auth).json()["sessionId"]

    def drifted() -> int:  # (a reply the local model writes off-voice: its drift is above 0.35, below 1.0)
        return http.post(f"/v1/chat/sessions/{session}/messages", json={"content": "[[drift]] go"},
                         headers=tenant.auth).status_code

    for _ in range(3):  # each step several replies: the calls spread over the stack's server processes
        assert {drifted() for _ in range(4)} == {409}  # the default threshold (0.35) blocks it
        r = http.put(f"/v1/config/{THRESHOLD}", json={"value": 1.0, "level": "org"}, headers=tenant.auth)
        assert r.status_code == 200, r.text
        assert {drifted() for _ in range(4)} == {200}
        r = http.put(f"/v1/config/{THRESHOLD}", json={"value": 0.35, "level": "persona", "personaId": persona},
                     headers=tenant.auth)
        assert r.status_code == 200, r.text
        assert {drifted() for _ in range(4)} == {409}  # the persona's level over the organization's
        for params in ({"level": "persona", "personaId": persona}, {"level": "org"}):
            assert http.delete(f"/v1/config/{THRESHOLD}", params=params, headers=tenant.auth).status_code == 200


def test_a_transaction_that_wrote_a_setting_reads_its_own_write(engine, tenant, monkeypatch):
    """Memory drops a key's rows once the writing transaction commits: until then that transaction reads them from
    the database (here the cache serves in this process, as in a server; no bus, so the test restores it)."""
    kept = repository._kept
    monkeypatch.setattr(read_cache, "_hold", [lambda _name, _key: math.inf])
    monkeypatch.setattr(kept, "capacity", 10)
    monkeypatch.setattr(kept, "serving", True)
    principal = Principal("api_key", "key_1", tenant.org_id, tenant.workspace_id, tenant.user_id, frozenset(),
                          "owner", tenant.plan, False)
    try:
        with engine.connect() as conn:
            config = ConfigService(Work.on(conn))
            default = config.value(principal, THRESHOLD)
            assert len(kept) == 1  # kept
            ConfigRepository(conn).upsert(tenant.org_id, ORG_LEVEL, THRESHOLD, 0.9, "test")
            assert config.value(principal, THRESHOLD) == 0.9  # its own write, not memory's rows
            conn.rollback()
        with engine.connect() as conn:  # another transaction: memory's rows (nothing committed)
            assert ConfigService(Work.on(conn)).value(principal, THRESHOLD) == default
    finally:
        kept.clear()


def test_other_modules_read_a_key_by_its_declared_type(engine, tenant):
    """`number`, `flag` and `choice` give a key's value as its declaration types it (config's api.py carries no
    Any); reading a key as another type is refused, whatever it holds."""
    principal = Principal("api_key", "key_1", tenant.org_id, tenant.workspace_id, tenant.user_id, frozenset(),
                          "owner", tenant.plan, False)
    with engine.connect() as conn:
        config = ConfigService(Work.on(conn))
        threshold = config.number(principal, THRESHOLD)
        assert isinstance(threshold, float) and threshold == config.value(principal, THRESHOLD)
        assert config.flag(principal, "engine.pipeline.audit.blocking") is True
        assert config.choice(principal, "engine.pipeline.drift_detection.action_on_alert") == "block"
        for read, key in ((config.flag, THRESHOLD), (config.number, "engine.pipeline.audit.blocking"),
                          (config.choice, THRESHOLD)):
            with pytest.raises(TypeError, match="is declared"):
                read(principal, key)
