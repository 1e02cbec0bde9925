"""Rate limits over HTTP/JSON through Envoy (mirrors
server/persona_service/limits): the headers on every response, per-minute and
per-day overruns, the Enterprise-only, Owner-only `api.rate_limit.*` config
items, the shared Redis windows across two server processes, and the
per-address bucket of unauthenticated requests. Spec: Limits."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from persona_service.config.repository import ORG_LEVEL, ConfigRepository
from persona_service.kernel import ids
from persona_service.kernel.principal import SCOPES
from persona_service.kernel.transport.limits.plans import ANONYMOUS_PER_MINUTE, PLAN_LIMITS, override_maximum
from persona_service.orgs.repository import OrgRepository
from support import assert_envelope, make_stack_beside, running

RPM = "/v1/config/api.rate_limit.requests_per_minute"
RPD = "/v1/config/api.rate_limit.requests_per_day"
HEADERS = (
    "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
    "x-service-plan-window-seconds", "ratelimit-policy", "ratelimit",
)
POLICY = re.compile(r'^"minute";q=(\d+);w=60, "day";q=(\d+);w=86400$')
RATELIMIT = re.compile(r'^"minute";r=(\d+);t=(\d+)$')


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def assert_limit_headers(response: httpx.Response, limit: int | None = None, day: int | None = None) -> int:
    """The documented rate-limit headers, consistent with each other. Returns Remaining."""
    now = time.time()
    for name in HEADERS:
        assert name in response.headers, f"{name} missing on {response.status_code}: {dict(response.headers)}"
    h = response.headers
    assert int(h["x-ratelimit-limit"]) > 0
    if limit is not None:
        assert int(h["x-ratelimit-limit"]) == limit
    remaining = int(h["x-ratelimit-remaining"])
    assert 0 <= remaining <= int(h["x-ratelimit-limit"])
    reset = int(h["x-ratelimit-reset"])
    assert now - 1 <= reset <= now + 61, (reset, now)
    assert h["x-service-plan-window-seconds"] == "60"
    policy = POLICY.match(h["ratelimit-policy"])
    assert policy, h["ratelimit-policy"]
    assert int(policy.group(1)) == int(h["x-ratelimit-limit"])
    if day is not None:
        assert int(policy.group(2)) == day
    current = RATELIMIT.match(h["ratelimit"])
    assert current, h["ratelimit"]
    assert int(current.group(1)) == remaining
    assert 0 <= int(current.group(2)) <= 60
    assert abs((reset - now) - int(current.group(2))) <= 2
    return remaining


def put_limit(http, secret: str, path: str, value) -> httpx.Response:
    return http.put(path, json={"value": value, "level": "org"}, headers=bearer(secret))


def member_key(engine, tenants, tenant, role: str, scopes=SCOPES) -> str:
    """A key created by another user of the tenant's organization with `role`."""
    user_id = ids.new_id("user")
    with engine.begin() as conn:
        repo = OrgRepository(conn)
        repo.create_user(id=user_id, email=f"{role}+{user_id}@example.invalid", name=f"An {role}", is_platform_admin=False)
        repo.add_member(tenant.org_id, user_id, role)
    return tenants.key(tenant.org_id, tenant.workspace_id, user_id, tenant.plan, list(scopes))


def wait_for_fresh_minute(margin: float = 15) -> None:
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.2)


def hit_until_429(http, tenant, max_requests: int) -> tuple[list[httpx.Response], httpx.Response]:
    passed = []
    for _ in range(max_requests):
        r = http.get(f"/v1/orgs/{tenant.org_id}", headers=tenant.auth)
        if r.status_code == 429:
            return passed, r
        assert r.status_code == 200, r.text
        passed.append(r)
    raise AssertionError(f"no 429 after {max_requests} requests")


# --- headers on every response -------------------------------------------------


@pytest.fixture(scope="module")
def pro(tenants):
    return tenants(plan="pro")


@pytest.mark.parametrize("case", ["200", "403", "404", "422"])
def test_every_authenticated_response_carries_the_headers(http, tenants, pro, case):
    if case == "200":
        r = http.get(f"/v1/orgs/{pro.org_id}", headers=pro.auth)
    elif case == "403":
        r = http.get("/v1/keys", headers=bearer(tenants.tenant_key(pro, ["personas:read"])))
    elif case == "404":
        r = http.get("/v1/config/no.such.key", headers=pro.auth)
    else:
        r = http.post("/v1/keys", json={"name": "x", "scopes": ["read:personas"]}, headers=pro.auth)
    assert r.status_code == int(case), r.text
    pro_limits = PLAN_LIMITS["pro"]
    assert_limit_headers(r, limit=pro_limits.requests_per_minute, day=pro_limits.requests_per_day)


def test_unauthenticated_response_carries_the_headers(http, pro):
    r = http.get(f"/v1/orgs/{pro.org_id}", headers={"Authorization": "Bearer sk_live_not-a-real-key"})
    # Other tests may have used up this address's anonymous minute already.
    assert r.status_code in (401, 429), r.text
    if r.status_code == 429:
        error = assert_envelope(r, 429, "rate_limited")
        assert error["details"]["limit"] == "anonymous"
    else:
        assert_envelope(r, 401, "unauthorized")
    assert_limit_headers(r, limit=ANONYMOUS_PER_MINUTE)


def test_remaining_decreases(http, tenants):
    t = tenants(plan="pro")
    for _ in range(3):
        a = http.get(f"/v1/orgs/{t.org_id}", headers=t.auth)
        b = http.get(f"/v1/orgs/{t.org_id}", headers=t.auth)
        if a.headers["x-ratelimit-reset"] == b.headers["x-ratelimit-reset"]:
            break  # both in one window
    assert a.status_code == b.status_code == 200
    assert a.headers["x-ratelimit-reset"] == b.headers["x-ratelimit-reset"]
    assert assert_limit_headers(b) == assert_limit_headers(a) - 1


# --- overruns ----------------------------------------------------------------------


def test_per_minute_overrun_is_rate_limited(http, tenants):
    t = tenants(plan="enterprise")
    r = put_limit(http, t.api_key, RPM, 5)
    assert r.status_code == 200, r.text
    assert r.json()["source"] == "org" and r.json()["value"] == 5

    passed, limited = hit_until_429(http, t, 20)
    assert len(passed) <= 5
    for ok in passed:
        assert int(ok.headers["x-ratelimit-limit"]) == 5
    error = assert_envelope(limited, 429, "rate_limited")
    retry_after = limited.headers["retry-after"]
    assert retry_after.isdigit() and 1 <= int(retry_after) <= 60
    assert error["details"]["retryAfter"] == int(retry_after)
    assert error["details"]["limit"] == "minute"
    assert error["details"]["limitValue"] == 5
    assert limited.headers["x-should-retry"] == "true"
    assert_limit_headers(limited, limit=5)
    assert limited.headers["x-ratelimit-remaining"] == "0"


def test_per_day_overrun_is_rate_limited(http, tenants):
    t = tenants(plan="enterprise")
    r = put_limit(http, t.api_key, RPD, 3)
    assert r.status_code == 200, r.text

    passed, limited = hit_until_429(http, t, 10)
    assert len(passed) <= 3
    error = assert_envelope(limited, 429, "rate_limited")
    assert error["details"]["limit"] == "day"
    assert error["details"]["limitValue"] == 3
    retry_after = limited.headers["retry-after"]
    assert retry_after.isdigit() and 1 <= int(retry_after) <= 86_400
    assert error["details"]["retryAfter"] == int(retry_after)
    assert_limit_headers(limited, day=3)


# --- who may change the limits ----------------------------------------------------


def test_non_owner_cannot_change_rate_limits(http, engine, tenants):
    t = tenants(plan="enterprise")
    admin = member_key(engine, tenants, t, "admin")
    r = put_limit(http, admin, RPM, 100)
    error = assert_envelope(r, 403, "forbidden")
    assert error["details"].get("requiredRole") == "owner"
    # Deleting is refused the same way.
    r = http.delete(RPM, params={"level": "org"}, headers=bearer(admin))
    assert_envelope(r, 403, "forbidden")
    # The admin may change other configuration.
    ok = http.put("/v1/config/engine.pipeline.audit.threshold", json={"value": 0.5, "level": "org"}, headers=bearer(admin))
    assert ok.status_code == 200, ok.text
    # Nothing changed.
    item = http.get(RPM, headers=t.auth).json()
    assert item["source"] == "default"
    assert item["value"] == PLAN_LIMITS["enterprise"].requests_per_minute


def test_owner_session_may_change_rate_limits(http, tenants, jwt_minter):
    t = tenants(plan="enterprise")
    session = jwt_minter.mint_session(t.user_id, t.org_id, t.workspace_id)
    r = put_limit(http, session, RPM, 1000)
    assert r.status_code == 200, r.text
    assert r.json()["value"] == 1000
    after = http.get(f"/v1/orgs/{t.org_id}", headers=t.auth)
    assert after.headers["x-ratelimit-limit"] == "1000"


@pytest.mark.parametrize("plan", ["pro", "team", "free"])
def test_rate_limits_are_enterprise_only(http, tenants, plan):
    t = tenants(plan=plan)
    r = put_limit(http, t.api_key, RPM, 100)
    error = assert_envelope(r, 403, "forbidden")
    assert error["details"]["requiredPlan"] == "enterprise"


def test_rate_limits_are_org_level_only(http, tenants):
    t = tenants(plan="enterprise")
    r = http.put(RPM, json={"value": 100, "level": "workspace"}, headers=t.auth)
    error = assert_envelope(r, 422, "validation_failed")
    assert error["details"]["validationErrors"][0]["path"] == "level"


# --- how far an organization may raise them ----------------------------------------

LIMIT_NAMES = PLAN_LIMITS["enterprise"].names()  # the modules' declared limits too


def test_overrides_above_the_operators_ceiling_are_refused_naming_the_maximum(http, tenants):
    """Every `api.rate_limit.*` key is bounded (default: 10x the Enterprise
    plan's value); the audit set 1,000,000 requests a minute."""
    t = tenants(plan="enterprise")
    error = assert_envelope(put_limit(http, t.api_key, RPM, 1_000_000), 422, "validation_failed")
    assert error["details"]["validationErrors"][0]["expected"]["maximum"] == 60_000
    for name in LIMIT_NAMES:
        path, maximum = f"/v1/config/api.rate_limit.{name}", override_maximum(name, 10)
        over = maximum + 1 if isinstance(maximum, int) else maximum * 1.5
        violation = assert_envelope(put_limit(http, t.api_key, path, over), 422, "validation_failed")[
            "details"]["validationErrors"][0]
        assert (violation["path"], violation["code"], violation["expected"]["maximum"]) == ("value", "range", maximum)
        assert put_limit(http, t.api_key, path, maximum).status_code == 200, name


@pytest.fixture(scope="module")
def pair(stack, tmp_path_factory):
    """A second stack on the session's PostgreSQL and Redis: two gRPC server
    processes behind one Envoy, whose operator allows twice the Enterprise
    limits (the ceiling bounds overrides only: the plans' own limits stand)."""
    two = make_stack_beside(stack, tmp_path_factory.mktemp("pair"), servers=2, PERSONA_LIMIT_OVERRIDE_CEILING="2")
    with running(two):
        yield two


def test_the_ceiling_is_the_operators_and_bounds_stored_values(pair, engine, tenants):
    t = tenants(plan="enterprise")
    enterprise = PLAN_LIMITS["enterprise"].requests_per_minute
    # A value stored before the operator lowered the ceiling applies at the maximum.
    with engine.begin() as conn:
        ConfigRepository(conn).upsert(t.org_id, ORG_LEVEL, "api.rate_limit.requests_per_minute", 1_000_000, "test")
    with httpx.Client(base_url=pair.http_url, timeout=30) as client:
        r = client.get(f"/v1/orgs/{t.org_id}", headers=t.auth)
        assert r.status_code == 200, r.text
        assert r.headers["x-ratelimit-limit"] == str(2 * enterprise)
        error = assert_envelope(put_limit(client, t.api_key, RPM, 2 * enterprise + 1), 422, "validation_failed")
        assert error["details"]["validationErrors"][0]["expected"]["maximum"] == 2 * enterprise


# --- two server processes share the windows ----------------------------------------


def test_limits_hold_across_two_server_processes(pair, engine, tenants):
    limit = 200
    t = tenants(plan="enterprise")
    with engine.begin() as conn:  # set directly: no request may count against the window
        ConfigRepository(conn).upsert(t.org_id, ORG_LEVEL, "api.rate_limit.requests_per_minute", limit, "test")

    wait_for_fresh_minute()
    with httpx.Client(base_url=pair.http_url, timeout=30, limits=httpx.Limits(max_connections=32)) as client:
        with ThreadPoolExecutor(max_workers=16) as pool:
            responses = list(pool.map(lambda _: client.get(f"/v1/orgs/{t.org_id}", headers=t.auth), range(2 * limit)))

    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 429}, sorted(set(statuses))
    ok = statuses.count(200)
    assert limit <= ok <= limit * 1.01, ok
    for r in responses:
        if r.status_code == 429:
            assert assert_envelope(r, 429, "rate_limited")["details"]["limit"] == "minute"
    # Both processes served this organization.
    for port in pair.grpc_ports:
        log = (pair.log_dir / f"server-{port}.log").read_text()
        assert f"org={t.org_id}" in log, f"server {port} served none of the burst"


def test_remaining_never_rises_across_two_server_processes(pair, tenants):
    """Team leases units per process; sequential calls alternate between the
    two processes, yet Remaining never rises within the window, and it is
    within the limiter's stated bounds of the truth (limiter docstring)."""
    from persona_service.kernel.transport.limits.limiter import REPORT_SECONDS

    t = tenants(plan="team")
    limit = PLAN_LIMITS["team"].requests_per_minute
    lease = limit // 1000  # units a process may hold unused
    wait_for_fresh_minute(margin=10)
    with httpx.Client(base_url=pair.http_url, timeout=30) as client:
        figures = []
        for n in range(1, 31):
            r = client.get(f"/v1/orgs/{t.org_id}", headers=t.auth)
            assert r.status_code == 200, r.text
            figures.append(assert_limit_headers(r, limit=limit))
            # Never more leased-but-unused units below the truth than two processes' leases.
            assert figures[-1] >= limit - n - 2 * lease, (n, figures)
        assert figures == sorted(figures, reverse=True), figures
        time.sleep(REPORT_SECONDS)  # a new tick: the figure catches up with every call admitted before it
        last = assert_limit_headers(client.get(f"/v1/orgs/{t.org_id}", headers=t.auth), limit=limit)
    assert limit - 31 - 2 * lease <= last <= limit - 31, (last, figures)


# --- answers without a credential, and the edge's own ----------------------------------


@pytest.mark.parametrize("path", ["/healthz", "/v1/openapi.json", "/docs"])
def test_answers_without_a_credential_report_the_address_window_without_counting(http, path):
    first = http.get(path)
    assert first.status_code == 200, first.text
    before = assert_limit_headers(first, limit=ANONYMOUS_PER_MINUTE)
    again = http.get(path)
    failed = http.get("/v1/keys", headers={"Authorization": "Bearer sk_live_not-a-real-key"})
    after = http.get(path)
    if not first.headers["x-ratelimit-reset"] == after.headers["x-ratelimit-reset"]:
        pytest.skip("the minute window turned during the test")
    assert assert_limit_headers(again, limit=ANONYMOUS_PER_MINUTE) == before  # counted against nothing
    assert failed.status_code in (401, 429)
    # The same window as failed credentials from this address.
    assert assert_limit_headers(after, limit=ANONYMOUS_PER_MINUTE) == max(0, before - 1)


EDGE_ANSWERS = {
    "malformed JSON": (400, "bad_request", lambda http, auth: http.post(
        "/v1/keys", content=b'{"name": ', headers={**auth, "Content-Type": "application/json"})),
    "unknown query parameter": (400, "bad_request", lambda http, auth: http.get(
        "/v1/personas", params={"noSuchParameter": "1"}, headers=auth)),
    "unknown path": (404, "not_found", lambda http, auth: http.get("/v1/no-such-thing", headers=auth)),
    "method": (405, "method_not_allowed", lambda http, auth: http.put("/v1/personas", json={}, headers=auth)),
    "body too large": (413, "payload_too_large", lambda http, auth: http.post(
        "/v1/keys", content=b"x" * (4 * 1024 * 1024 + 1), headers={**auth, "Content-Type": "application/json"})),
    "media type": (415, "unsupported_media_type", lambda http, auth: http.post(
        "/v1/keys", content=b"name=x", headers={**auth, "Content-Type": "text/plain"})),
    "URL too long": (431, "headers_too_large", lambda http, auth: http.get(
        "/v1/personas", params={"q": "x" * 9000}, headers=auth)),
}


@pytest.mark.parametrize("kind", EDGE_ANSWERS)
def test_the_edges_own_answers_carry_no_rate_limit_headers(http, pro, kind):
    """Envoy answers these before any server: it has read no credential and
    holds no window, so they count against none and report none (docs/contract-decisions.md:
    rate limits), rather than figures that would mislead a client's backoff."""
    status, code, call = EDGE_ANSWERS[kind]
    r = call(http, pro.auth)
    assert_envelope(r, status, code)
    assert not [name for name in HEADERS if name in r.headers], dict(r.headers)
