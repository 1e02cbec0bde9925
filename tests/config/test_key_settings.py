"""One setting's rows read prepared (config/repository.py `key_settings`, issue 50: the drift threshold a chat
reply acts by, without SQLAlchemy's per-execution layers): the same rows as `settings(key=...)`, at every level,
and the effective value the levels give (persona → workspace → org → default)."""

from __future__ import annotations

import uuid

from persona_service.config.repository import ORG_LEVEL, ConfigRepository, persona_level
from persona_service.config.service import ConfigService
from persona_service.kernel.principal import Principal
from sqlalchemy import event

THRESHOLD = "engine.pipeline.drift_detection.threshold"


def test_a_keys_rows_read_prepared_are_settings_rows(engine, tenant):
    principal = Principal("api_key", "key_1", tenant.org_id, tenant.workspace_id, tenant.user_id, frozenset(),
                          "owner", tenant.plan, False)
    persona, other = str(uuid.uuid4()), str(uuid.uuid4())
    with engine.connect() as conn:
        repo, config = ConfigRepository(conn), ConfigService(conn)
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
