"""Credential invalidations are synchronous across server processes: once
the call that suspends a member (SCIM `active: false`) or revokes a key has
answered, no server process accepts that credential any more, even one that
had it cached a moment before. Two server processes behind one Envoy, caches
warmed in both and kept busy by other calls of the same credentials while
the IdP keeps writing another user (each SCIM write drops the organization's
cached credentials, so calls in flight keep reading them again, also while
the suspension commits), 30 rounds each. Then each of the two mechanisms
(process/invalidations.py: the sender waits for every bus listener's confirmation;
kernel/transport/auth.py: a credential read before an eviction is not cached after
it) made to lose its race deterministically."""

from __future__ import annotations

import contextlib
import threading
import uuid

import httpx
import pytest
import redis
from persona_service.kernel.clock import utcnow
from persona_service.kernel.errors import Unauthorized
from persona_service.kernel.transport.auth import Authenticator, CredentialCache, KeyCredential
from persona_service.process.app import INVALIDATION_CHANNEL
from scim.scim_client import USER, Scim
from support import JWT_SECRET, SCOPES, client_for, make_stack_beside, running

ROUNDS = 30
WARM_CALLS = 6  # enough for Envoy to send each credential to both processes
BUSY_THREADS = 2


@pytest.fixture(scope="module")
def pair(stack, tenants, tmp_path_factory):
    """Two server processes behind one Envoy, on the session's PostgreSQL and Redis (its invalidation bus: the
    session's server listens there too, and a suspension waits for its confirmation as well)."""
    with running(make_stack_beside(stack, tmp_path_factory.mktemp("invalidation"), servers=2)) as two, \
            client_for(two) as http:
        org = tenants(plan="enterprise")
        token = http.post("/v1/auth/scim/tokens", json={"name": "IdP"}, headers=org.auth).json()["secret"]
        scim = Scim(http, token)
        yield http, tenants, org, scim, scim.user(f"bystander-{uuid.uuid4().hex[:8]}@example.com")


def client(http, address: str) -> httpx.Client:
    """A client calling from its own loopback address: refused calls are
    limited per client address (60 a minute), and every round makes some."""
    return httpx.Client(base_url=http.base_url, timeout=30, transport=httpx.HTTPTransport(local_address=address))


@contextlib.contextmanager
def busy(http, round_: int, scim, bystander, *credentials):
    """Other clients calling with the same credentials until they are refused,
    and the IdP renaming another user meanwhile."""
    done = threading.Event()

    def churn() -> None:
        n = 0
        while not done.is_set():
            n += 1
            scim.patch(f"/Users/{bystander['id']}", {"op": "replace", "path": "displayName", "value": f"B {n}"})

    def call(n: int) -> None:
        live = list(credentials)
        with client(http, f"127.0.{1 + n}.{1 + round_}") as other:
            while live and not done.is_set():
                for headers in list(live):
                    if other.get("/v1/personas", headers=headers).status_code != 200:
                        live.remove(headers)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(BUSY_THREADS)]
    threads.append(threading.Thread(target=churn))
    for t in threads:
        t.start()
    try:
        yield
    finally:
        done.set()
        for t in threads:
            t.join(30)


def _member(tenants, org, scim):
    """A provisioned member's API key and session JWT, accepted (and so cached) by both processes."""
    user = scim.user(f"inv-{uuid.uuid4().hex[:10]}@example.com")
    key = tenants.key(org.org_id, org.workspace_id, user["id"], org.plan, [s for s in SCOPES if s != "config:write"])
    jwt = Authenticator(JWT_SECRET, CredentialCache(0)).mint_session(user["id"], org.org_id, org.workspace_id)
    return user, {"Authorization": f"Bearer {key}"}, {"Authorization": f"Bearer {jwt}"}


def _warm(http, *credentials):
    for _ in range(WARM_CALLS):
        for headers in credentials:
            assert http.get("/v1/personas", headers=headers).status_code == 200


def test_scim_suspension_refuses_key_and_session_on_the_next_call(pair):
    http, tenants, org, scim, bystander = pair
    for round_ in range(ROUNDS):
        user, key, session = _member(tenants, org, scim)
        _warm(http, key, session)
        with busy(http, round_, scim, bystander, key, session), client(http, f"127.0.100.{1 + round_}") as mine:
            _suspend(scim, user, by_put=bool(round_ % 2))
            first, second = (key, session) if round_ % 4 < 2 else (session, key)
            assert mine.get("/v1/personas", headers=first).status_code == 401, f"round {round_}"
            assert mine.get("/v1/personas", headers=second).status_code == 401, f"round {round_}"


def _suspend(scim, user, by_put: bool) -> None:
    if by_put:  # Okta deactivates by PUT, Entra by PATCH
        r = scim.call("PUT", f"/Users/{user['id']}", {"schemas": [USER], "userName": user["userName"], "active": False})
    else:
        r = scim.patch(f"/Users/{user['id']}", {"op": "replace", "path": "active", "value": False})
    assert r.status_code == 200, r.text


def test_key_revocation_refuses_the_key_on_the_next_call(pair):
    http, tenants, org, scim, bystander = pair
    for round_ in range(ROUNDS):
        made = http.post("/v1/keys", json={"name": "short-lived", "scopes": ["personas:read"]}, headers=org.auth)
        assert made.status_code == 200, made.text
        key = {"Authorization": f"Bearer {made.json()['secret']}"}
        _warm(http, key)
        with busy(http, round_, scim, bystander, key), client(http, f"127.0.100.{101 + round_}") as mine:
            revoked = http.post(f"/v1/keys/{made.json()['key']['id']}/revoke", json={}, headers=org.auth)
            assert revoked.status_code == 200, revoked.text
            assert mine.get("/v1/personas", headers=key).status_code == 401, f"round {round_}"


# --- the two mechanisms, each made to lose its race deterministically ------------------------


class GatedStore:
    """A credential store whose next key lookup waits at a gate: a call in
    flight that read the key before its revocation committed."""

    key_prefixes = ("sk_live_",)

    def __init__(self):
        self.revoked = False
        self.reading, self.release = threading.Event(), threading.Event()

    def find_key(self, conn, secret_hash):
        revoked_at = utcnow() if self.revoked else None
        credential = KeyCredential(id="key_1", org_id="org_1", workspace_id="ws_1", user_id="usr_1",
                                   scopes=frozenset(SCOPES), role="member", plan="pro", is_platform_admin=False,
                                   ip_allowlist=(), expires_at=None, revoked_at=revoked_at)
        if not self.reading.is_set():
            self.reading.set()
            self.release.wait(10)
        return credential


def test_a_credential_read_before_an_eviction_is_not_cached_after_it():
    store = GatedStore()
    cache = CredentialCache(30)
    cache.bus_up = True
    auth = Authenticator(JWT_SECRET, cache, store=store)
    in_flight = threading.Thread(target=auth.authenticate, args=("Bearer sk_live_x", lambda: None))
    in_flight.start()
    assert store.reading.wait(10)  # it read the key as it was before the revocation
    store.revoked = True  # the revocation commits, then evicts
    cache.evict_where(lambda principal: principal.org_id == "org_1")
    store.release.set()
    in_flight.join(10)
    with pytest.raises(Unauthorized):  # read again, not the in-flight call's stale principal
        auth.authenticate("Bearer sk_live_x", lambda: None)


def test_suspension_answers_only_once_every_process_applied_it(stack, http, tenants):
    """A listener on the invalidation bus (as each server process has) that
    has not yet applied the suspension holds its answer back."""
    from scim.scim_client import Scim

    org = tenants(plan="pro")
    token = http.post("/v1/auth/scim/tokens", json={"name": "IdP"}, headers=org.auth).json()["secret"]
    scim = Scim(http, token)
    user = scim.user(f"slow-{uuid.uuid4().hex[:8]}@example.com")
    bus = redis.Redis.from_url(stack.redis_url)
    listener = bus.pubsub(ignore_subscribe_messages=True)
    listener.subscribe(INVALIDATION_CHANNEL)
    answered: list[int] = []
    with client_for(stack) as other:
        suspension = threading.Thread(target=lambda: answered.append(Scim(other, token).patch(
            f"/Users/{user['id']}", {"op": "replace", "path": "active", "value": False}).status_code))
        suspension.start()
        acks = _invalidation(listener, f"org:{org.org_id}")
        suspension.join(0.5)
        assert not answered, "the suspension answered before this process applied it"
        bus.rpush(acks, 1)  # applied: now it may answer
        suspension.join(10)
    assert answered == [200]
    listener.close()


def _invalidation(listener, wanted: str) -> str:
    """The ack list of the next invalidation `wanted` on the bus."""
    for _ in range(100):
        message = listener.get_message(timeout=10)
        if message is not None:
            acks, _, applied = message["data"].decode().partition(" ")
            if applied == wanted:
                return acks
    raise AssertionError(f"no {wanted} on the invalidation bus")
