"""HTTP health probes through Envoy, without credentials: `/healthz` always
answers while a server does; `/readyz` checks PostgreSQL, Redis and the
migrations, and answers 503 naming what failed."""

from __future__ import annotations

from persona_service.process.readiness import readiness
from sqlalchemy import create_engine
from support import wait_until, writes_locked


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
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    dead_db = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none", connect_args={"connect_timeout": 1})
    # Tried once: redis-py's default retry (10 tries, backing off) spends about 4 s on the refused ping, and what
    # is tested is what readiness names once it fails.
    dead_redis = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
    checks = {c.name: c.ok for c in readiness(dead_db.connect, dead_redis.ping, [])}
    assert checks == {"postgres": False, "migrations": False, "redis": False, "server": True}


def _samples(text: str, name: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line.rpartition(" ")
            found[labels] = float(value)
    return found


def test_metrics_count_requests_of_every_server_process(http, tenant):
    before = _samples(http.get("/metrics").text, "persona_requests_total")
    for _ in range(3):
        assert http.get("/v1/personas", headers=tenant.auth).status_code == 200
    assert http.get("/v1/personas/not-a-uuid", headers=tenant.auth).status_code == 404
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    after = _samples(r.text, "persona_requests_total")
    ok = 'persona_requests_total{code="",rpc="/persona.v1.PersonaService/ListPersonas",status="200"}'
    missing = 'persona_requests_total{code="not_found",rpc="/persona.v1.PersonaService/GetPersona",status="404"}'
    assert after[ok] - before.get(ok, 0) == 3
    assert after[missing] - before.get(missing, 0) == 1
    assert "persona_request_seconds_bucket" in r.text


def test_metrics_sum_over_processes_and_honour_the_token(stack, tenants, tmp_path_factory):
    from support import client_for, make_stack_beside, running

    # Processes of their own (their own metrics), on the session's PostgreSQL and Redis.
    two = make_stack_beside(stack, tmp_path_factory.mktemp("metrics"), servers=2, PERSONA_METRICS_TOKEN="scrape-me")
    with running(two), client_for(two) as http:
        tenant = tenants()
        for _ in range(20):  # Envoy spreads them over both processes
            assert http.get("/v1/personas", headers=tenant.auth).status_code == 200
        assert http.get("/metrics").status_code == 401
        assert http.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        scrapes = [http.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).text for _ in range(4)]
        ok = 'persona_requests_total{code="",rpc="/persona.v1.PersonaService/ListPersonas",status="200"}'
        # Whichever process answers the scrape, it counts both processes' calls.
        assert {_samples(text, "persona_requests_total")[ok] for text in scrapes} == {20.0}
        pids = {f.name for f in two.metrics_dir.iterdir()}
        assert len({name.rsplit("_", 1)[-1] for name in pids}) >= 2, pids


def test_metrics_of_generation_providers_streams_pools_and_webhooks(http, engine, tenant):
    def total(text: str, name: str, **labels: str) -> float:
        return sum(v for k, v in _samples(text, name).items() if all(f'{n}="{v}"' in k for n, v in labels.items()))

    before = http.get("/metrics").text
    assert http.post("/v1/personas", json={"intent": "A lighthouse keeper who counts ships"},
                     headers=tenant.auth).status_code == 200
    # The run cannot commit (its audit entry waits on the lock) while the gauge is read, so the stream is still
    # open then: a fast generation could otherwise end before the stream server's gauge is scraped.
    with writes_locked(engine, "audit_events") as lock, \
            http.stream("POST", "/v1/personas?stream=true", json={"intent": "A baker who sings to the dough"},
                        headers=tenant.auth) as streamed:
        assert streamed.status_code == 200
        wait_until(lambda: total(http.get("/metrics").text, "persona_open_streams") >= 1, 30, "the stream's gauge")
        lock.rollback()
        streamed.read()

    def sampled() -> str:
        """The scrape once pools (every 5 s) and the webhook queue (every 15 s) are sampled and the stream's
        gauge dropped as it ended; empty before."""
        text = http.get("/metrics").text
        return text if "persona_db_pool_connections{" in text and "persona_webhook_queue_depth " in text \
            and total(text, "persona_open_streams") == 0 else ""

    after = wait_until(sampled, 60, "pools and the webhook queue sampled, the stream's gauge back to 0", every=0.5)
    assert total(after, "persona_generation_runs_total", outcome="completed") - \
        total(before, "persona_generation_runs_total", outcome="completed") >= 2
    assert total(after, "persona_generation_step_seconds_count", outcome="completed") > \
        total(before, "persona_generation_step_seconds_count", outcome="completed")
    assert total(after, "persona_provider_calls_total", provider="local", outcome="ok") > \
        total(before, "persona_provider_calls_total", provider="local", outcome="ok")
    assert total(after, "persona_open_streams") == 0
    assert total(after, "persona_db_pool_connections", pool="unary", state="size") > 0
    assert "persona_webhook_queue_depth " in after
