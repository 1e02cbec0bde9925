"""HTTP health probes through Envoy, without credentials: `/healthz` always
answers while a server does; `/readyz` checks PostgreSQL, Redis and the
migrations, and answers 503 naming what failed."""

from __future__ import annotations

from persona_service.probes.checks import readiness
from sqlalchemy import create_engine


def test_liveness_and_readiness_need_no_credentials(http):
    r = http.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok", "checks": []}
    r = http.get("/readyz")
    assert r.status_code == 200, r.text
    assert {c["name"]: c["ok"] for c in r.json()["checks"]} == {
        "postgres": True, "migrations": True, "redis": True, "server": True}
    assert http.head("/readyz").status_code == 200


def test_readiness_names_what_is_down(stack):
    import redis

    dead_db = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none", connect_args={"connect_timeout": 1})
    dead_redis = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    checks = {c.name: c.ok for c in readiness(dead_db, dead_redis, [])}
    assert checks == {"postgres": False, "migrations": False, "redis": False, "server": True}
