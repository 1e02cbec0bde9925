"""scripts/bench_peer.py keeps the service's contract for GET
/v1/chat/sessions/{id}: the benchmark compares like with like only if the
peer answers the bytes Envoy answers, with the same headers and the same
401/403/404/429 envelopes. The peer runs on the test stack's PostgreSQL and
Redis, so both share one rate-limit window per organization."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time

import httpx
import pytest
from persona_service.config.repository import ORG_LEVEL, ConfigRepository
from persona_service.process.stack import free_port
from support import ROOT

for module in ("asyncpg", "orjson", "starlette", "uvloop", "httptools"):
    pytest.importorskip(module, reason="`make bench-tools` installs the peer's packages")

SCRIPTS = ROOT / "scripts"
# Headers whose values must be equal; the remaining count and its RateLimit twin only count down.
SAME = ("x-request-id", "x-ratelimit-limit", "x-ratelimit-reset", "x-service-plan-window-seconds", "ratelimit-policy",
        "x-should-retry", "retry-after", "content-type")
COUNTERS = ("x-ratelimit-remaining", "ratelimit")
# A title protobuf's JSON writer escapes in places orjson does not (HTML-significant, invisible characters).
TITLE = 'Café ☕ "q" \\ <b>&</b> \x7f\xad\u2028\u200b\ufeff 🗺\U000e0041 end'


@pytest.fixture(scope="module")
def peer(stack, tmp_path_factory):
    log = tmp_path_factory.mktemp("peer") / "peer.log"
    env = {**os.environ, "DATABASE_URL": stack.database_url, "REDIS_URL": stack.redis_url,
           "PEER_PORT": str(free_port()), "PEER_WORKERS": "1", "PEER_POOL_SIZE": "2",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(SCRIPTS), os.environ.get("PYTHONPATH", "")]))}
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, str(SCRIPTS / "bench_peer.py")], env=env, cwd=SCRIPTS,
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    client = httpx.Client(base_url=f"http://127.0.0.1:{env['PEER_PORT']}", timeout=30)
    deadline = time.monotonic() + 60
    while True:
        try:
            client.get("/healthz").raise_for_status()
            break
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("the peer did not start: " + log.read_text()[-3000:])
            time.sleep(0.1)
    yield client
    client.close()
    process.terminate()
    process.wait(15)
    print(log.read_text()[-3000:])  # its access lines and any error, shown when a test failed


def assert_same(service: httpx.Response, peer: httpx.Response) -> None:
    assert (peer.status_code, peer.content) == (service.status_code, service.content)
    for name in SAME:
        assert peer.headers.get(name) == service.headers.get(name), name
    for name in COUNTERS:
        assert (name in peer.headers) == (name in service.headers), name


def both(http, peer, path: str, headers: dict[str, str]) -> tuple[httpx.Response, httpx.Response]:
    headers = {"X-Request-Id": "bench-peer-contract", **headers}
    return http.get(path, headers=headers), peer.get(path, headers=headers)


def test_the_peer_answers_the_services_json_bytes_and_headers(http, peer, tenants, engine):
    tenant = tenants(plan="enterprise")
    # Enterprise limits come from the organization's overrides, read by the peer asynchronously.
    with engine.begin() as conn:
        ConfigRepository(conn).upsert(tenant.org_id, ORG_LEVEL, "api.rate_limit.requests_per_minute", 3000, "test")
    persona = http.post("/v1/personas", headers=tenant.auth, json={"intent": "A cartographer who loves old maps"})
    session = http.post("/v1/chat/sessions", headers=tenant.auth, json={"personaId": persona.json()["id"], "title": TITLE})
    assert session.status_code == 200, session.text
    service, answer = both(http, peer, f"/v1/chat/sessions/{session.json()['sessionId']}", tenant.auth)
    assert service.status_code == 200 and service.headers["x-ratelimit-limit"] == "3000"
    assert_same(service, answer)
    # Without a usable X-Request-Id, each makes a uuid4.
    _, answer = both(http, peer, f"/v1/chat/sessions/{session.json()['sessionId']}",
                     {**tenant.auth, "X-Request-Id": "not an id"})
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", answer.headers["x-request-id"])


def test_the_peer_answers_the_services_401_403_and_404_envelopes(http, peer, tenants):
    tenant = tenants(plan="enterprise")  # IP allowlists are Enterprise's
    read_nothing = tenants.key(tenant.org_id, tenant.workspace_id, tenant.user_id, "enterprise", ["personas:read"])
    elsewhere = tenants.key(tenant.org_id, tenant.workspace_id, tenant.user_id, "enterprise", ["chat:read"],
                            ip_allowlist=["203.0.113.0/24"])
    cases = [
        ("/v1/chat/sessions/chs_nothere", tenant.auth),
        ("/v1/chat/sessions/not-a-session-id", tenant.auth),
        ("/v1/chat/sessions/chs_nothere", {"Authorization": f"Bearer {read_nothing}"}),
        ("/v1/chat/sessions/chs_nothere", {"Authorization": f"Bearer {elsewhere}"}),
        ("/v1/chat/sessions/chs_nothere", {"Authorization": "Bearer sk_live_not_a_key"}),
        ("/v1/chat/sessions/chs_nothere", {"Authorization": "Basic abc"}),
        ("/v1/chat/sessions/chs_nothere", {}),
    ]
    statuses = []
    for path, headers in cases:
        service, answer = both(http, peer, path, headers)
        assert_same(service, answer)
        statuses.append(service.status_code)
    assert statuses == [404, 404, 403, 403, 401, 401, 401]


def test_the_peer_answers_the_services_429_from_the_same_window(http, peer, tenants):
    tenant = tenants(plan="free")  # 60 a minute: no leases, every call counted in Redis
    path = "/v1/chat/sessions/chs_nothere"
    for _ in range(70):
        if http.get(path, headers=tenant.auth).status_code == 429:
            break
    service, answer = both(http, peer, path, tenant.auth)
    assert service.status_code == 429
    # The seconds to the window's end may tick between the two calls.
    if answer.headers["retry-after"] != service.headers["retry-after"]:
        service = http.get(path, headers={"X-Request-Id": "bench-peer-contract", **tenant.auth})
    assert_same(service, answer)


def test_the_peer_leases_as_the_service_does(stack, monkeypatch):
    """64 units reserved by one script call for limits of 64,000 and more, none under 2,000."""
    monkeypatch.setenv("DATABASE_URL", stack.database_url)
    monkeypatch.setenv("REDIS_URL", stack.redis_url)
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import bench_peer
    import redis.asyncio as aioredis
    from persona_service.kernel.transport.limits.plans import PLAN_LIMITS

    monkeypatch.setattr(bench_peer, "LEASE_SECONDS", 600.0)  # no lease expires during the test

    async def counted(subject: str, limits, calls: int) -> tuple[int, list[str]]:
        client = aioredis.Redis.from_url(stack.redis_url)
        limiter = bench_peer.Limiter(client)
        remaining = [dict(await limiter.admit(subject, limits, "t"))["x-ratelimit-remaining"] for _ in range(calls)]
        used = int(await client.get((await client.keys(f"rl:{{{subject}}}:minute:*"))[0]))
        await client.aclose()
        return used, remaining

    big = PLAN_LIMITS["enterprise"].with_overrides({"requests_per_minute": 100_000, "requests_per_day": 10**7})
    used, remaining = asyncio.run(counted(f"org_lease_{os.getpid()}", big, 5))
    assert used == 64 and remaining == [str(100_000 - n) for n in range(1, 6)]
    used, remaining = asyncio.run(counted(f"org_exact_{os.getpid()}", PLAN_LIMITS["pro"], 5))
    assert used == 5 and remaining == [str(600 - n) for n in range(1, 6)]
