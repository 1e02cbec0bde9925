"""The race hunt: every write operation, two calls at once, through the edge.

The operation table is the OpenAPI document generated from the protos
(gen/openapi.json): an operation is hunted when its declared policy honours
`Idempotency-Key` (a caller's write answered at once). For each, on a
resource made fresh for the round:
- one call alone, to learn what it emits (events of the organization);
- two calls at once with the same key: no 5xx, one execution (a 2xx is
  answered identically to both, or the other is told the key is `in_flight`),
  and the events of one call, each once;
- two calls at once with different keys on one resource: the statuses two
  calls get one after the other (a success, or the documented refusal of
  the one that came second), never a 5xx;
- an update (PATCH, PUT) at once with the delete of its resource: the
  statuses of one of the two serial orders.
A short form runs in the suite (tests/scripts/test_race_hunt.py, one round);
this script runs more rounds against a running instance:

    python scripts/race_hunt.py --url http://127.0.0.1:8080 --key sk_live_... \\
        [--admin-key sk_live_...] [--seller-key sk_live_...] [--database-url postgresql://...] [--rounds 20]

`--key` is an Enterprise organization's API key with every scope (the
operations act on its resources; SCIM through a token it makes), `--seller-key`
another organization's (it lists what `--key` buys), `--admin-key` a platform
administrator's. Without `--database-url` events are not counted. It prints
one line per finding and exits 1 when there is any.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

OPENAPI = pathlib.Path(__file__).resolve().parents[1] / "gen" / "openapi.json"
SCIM_BASE = "/v1/auth/scim/v2"
SCIM_TYPE = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
CONFIG_KEY = "engine.pipeline.audit.threshold"


@dataclass(frozen=True)
class Operation:
    verb: str
    path: str  # the template, e.g. /v1/webhooks/{id}
    operation_id: str


def operations(openapi: pathlib.Path = OPENAPI) -> list[Operation]:
    """The write operations whose policy honours Idempotency-Key, as the generated document declares them."""
    doc = json.loads(openapi.read_text())
    found = []
    for path, item in doc["paths"].items():
        for verb, op in item.items():
            if not isinstance(op, dict):
                continue
            params = [p.get("$ref", "") + p.get("name", "") for p in op.get("parameters", [])]
            if any("dempotency" in p for p in params):
                found.append(Operation(verb.upper(), path, op["operationId"]))
    return found


def _new(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class World:
    """The callers and the resources an operation acts on, made fresh for each round."""

    http: httpx.Client
    key: str
    admin_key: str | None = None
    seller_key: str | None = None
    # Events of the organization so far (None: not counted).
    events: Callable[[], int] | None = None
    # A throwaway caller (an operation that erases its caller's data), or None: skipped.
    throwaway: Callable[[], str] | None = None
    _scim_token: str | None = None
    _listing: dict | None = field(default=None, repr=False)

    def auth(self, secret: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret or self.key}"}

    def ok(self, response: httpx.Response) -> dict:
        assert response.status_code in (200, 201), f"setup failed: {response.status_code} {response.text[:300]}"
        return response.json() if response.content else {}

    @property
    def scim_token(self) -> str:
        if self._scim_token is None:
            made = self.ok(self.http.post("/v1/auth/scim/tokens", json={"name": "race hunt"}, headers=self.auth()))
            self._scim_token = made["secret"]
        return self._scim_token

    def persona(self) -> dict:
        return self.ok(self.http.post("/v1/personas", json={"intent": "A patient ferry captain"}, headers=self.auth()))

    def resource(self, op: Operation) -> tuple[str, dict[str, str]] | None:
        """The operation's path on a fresh resource, and the headers of its caller; None: not huntable here."""
        path, headers = op.path, self.auth()
        if path.startswith("/v1/admin/"):
            if self.admin_key is None:
                return None
            headers = self.auth(self.admin_key)
        if op.operation_id == "EraseMyData":
            if self.throwaway is None:
                return None
            headers = self.auth(self.throwaway())
        if path.startswith(SCIM_BASE):
            headers = {"Authorization": f"Bearer {self.scim_token}", "Content-Type": SCIM_TYPE, "Accept": SCIM_TYPE}
        if op.operation_id == "PurchaseListing" and self.seller_key is None:
            return None
        if op.operation_id in _STATE_BEFORE:
            # The org's one subscription is the resource: put it back in the state the
            # operation acts on, so each scenario starts where the one alone did.
            self.http.post(_STATE_BEFORE[op.operation_id], json={}, headers=self.auth())
        return _fill(path, self._ids(op)), headers

    def _ids(self, op: Operation) -> list[str]:
        path = op.path
        if path.startswith("/v1/personas/{persona_id}/portrait"):
            persona = self.persona()
            if "{id}" not in path:
                return [persona["id"]]
            portrait = self.ok(self.http.post(f"/v1/personas/{persona['id']}/portraits", json={},
                                              headers=self.auth()))
            return [persona["id"], portrait["id"]]
        if path.startswith("/v1/personas/{id}"):
            return [self.persona()["id"]]
        if path.startswith("/v1/chat/sessions/{id}"):
            session = self.ok(self.http.post("/v1/chat/sessions", json={"personaId": self.persona()["id"]},
                                             headers=self.auth()))
            return [session["sessionId"]]
        if path.startswith("/v1/webhooks/{"):
            endpoint = self.ok(self.http.post("/v1/webhooks", json={"url": "https://127.0.0.1:9/hook", "events": ["*"]},
                                              headers=self.auth()))["endpoint"]
            return [endpoint["id"], "whd_" + uuid.uuid4().hex[:20]]
        if path.startswith("/v1/keys/{id}"):
            made = self.ok(self.http.post("/v1/keys", json={"name": _new("race"), "scopes": ["chat:read"]},
                                          headers=self.auth()))
            return [made["key"]["id"]]
        if path.startswith("/v1/auth/scim/tokens/{id}"):
            made = self.ok(self.http.post("/v1/auth/scim/tokens", json={"name": _new("race")}, headers=self.auth()))
            return [made["token"]["id"] if "token" in made else made["id"]]
        if path.startswith(f"{SCIM_BASE}/Users/"):
            return [self._scim("/Users", {"schemas": [USER], "userName": _new("race") + "@example.com"})["id"]]
        if path.startswith(f"{SCIM_BASE}/Groups/"):
            return [self._scim("/Groups", {"schemas": [GROUP], "displayName": _new("race")})["id"]]
        if path == "/v1/marketplace/listings/{id}/purchase":
            return [self._seller_listing()["id"]]
        if path.startswith("/v1/marketplace/listings/{id}"):
            return [self._listing_of(self.key)["id"]]
        if path.startswith("/v1/config/{key}"):
            return [CONFIG_KEY]
        return ["nope_" + uuid.uuid4().hex[:20]] * path.count("{")  # an unknown resource: both answer 404

    def _scim(self, kind: str, body: dict) -> dict:
        return self.ok(self.http.post(SCIM_BASE + kind, content=json.dumps(body), headers={
            "Authorization": f"Bearer {self.scim_token}", "Content-Type": SCIM_TYPE}))

    def _listing_of(self, secret: str) -> dict:
        persona = self.ok(self.http.post("/v1/personas", json={"intent": "A cheerful sommelier"},
                                         headers=self.auth(secret)))
        return self.ok(self.http.post("/v1/marketplace/listings", headers=self.auth(secret), json={
            "personaId": persona["id"], "title": _new("Wine tutor"), "description": "Gentle tastings",
            "audienceTags": ["education"], "priceMinor": 100}))

    def _seller_listing(self) -> dict:
        """A listing of the seller's, published (its review runs in the background)."""
        assert self.seller_key is not None
        listing = self._listing_of(self.seller_key)
        deadline = time.monotonic() + 15
        while listing["status"] == "pending_review" and time.monotonic() < deadline:
            time.sleep(0.05)
            listing = self.ok(self.http.get(f"/v1/marketplace/listings/{listing['id']}",
                                            headers=self.auth(self.seller_key)))
        return listing


# Singleton resources: the call that restores the state an operation acts on.
_STATE_BEFORE = {
    "CancelSubscription": "/v1/billing/subscription/resume",
    "ResumeSubscription": "/v1/billing/subscription/cancel",
}


def _fill(template: str, ids: list[str]) -> str:
    import re

    for value in ids:
        template = re.sub(r"\{[^}]*\}", value, template, count=1)
    return template


def body(op: Operation, world: World) -> Any:
    """A valid request body of the operation (SCIM's sent as SCIM JSON); {} where it takes none."""
    if op.operation_id in ("CreateChatSession", "CreateChatCompletion"):
        persona = world.persona()["id"]
        return {"personaId": persona} if op.operation_id == "CreateChatSession" else {
            "model": f"persona://{persona}", "messages": [{"role": "user", "content": "Hello"}]}
    samples: dict[str, Any] = {
        "CreateScimToken": {"name": _new("race")},
        "CreateScimGroup": {"schemas": [GROUP], "displayName": _new("race")},
        "CreateScimUser": {"schemas": [USER], "userName": _new("race") + "@example.com"},
        "ReplaceScimGroup": {"schemas": [GROUP], "displayName": _new("race")},
        "ReplaceScimUser": {"schemas": [USER], "userName": _new("race") + "@example.com"},
        "PatchScimGroup": {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "path": "displayName",
                                                                   "value": _new("race")}]},
        "PatchScimUser": {"schemas": [PATCH_OP], "Operations": [{"op": "replace", "path": "active", "value": False}]},
        "ChangeSubscription": {"plan": "enterprise"},
        "SendChatMessage": {"content": "Hello there"},
        "UpdateConfigItem": {"value": 0.5, "level": "org"},
        "CreateApiKey": {"name": _new("race"), "scopes": ["chat:read"]},
        "UpdateListing": {"title": _new("Renamed")},
        "CreatePersona": {"intent": "A calm gardener who explains compost"},
        "ImportPersonaCard": {"spec": "chara_card_v2", "spec_version": "2.0",
                              "data": {"name": "Ada Race", "description": "A careful engineer"}},
        "UpdatePersona": {"displayName": _new("Renamed")},
        "RefinePersona": {"instruction": "Make them a little warmer"},
        "EditPortrait": {"instruction": "Make the background blue"},
        "CreateWebhookEndpoint": {"url": "https://127.0.0.1:9/hook", "events": ["*"]},
        "UpdateWebhookEndpoint": {"description": _new("race")},
        "ResolveModerationReview": {"decision": "approve"},
    }
    return samples.get(op.operation_id, {})


@dataclass
class Finding:
    operation: str
    scenario: str
    what: str

    def __str__(self) -> str:
        return f"{self.operation} [{self.scenario}]: {self.what}"


def _call(http: httpx.Client, op: Operation, path: str, headers: dict[str, str], payload: Any, key: str) -> httpx.Response:
    sent = {**headers, "Idempotency-Key": key}
    if path.startswith(SCIM_BASE):
        return http.request(op.verb, path, content=json.dumps(payload) if op.verb != "DELETE" else None, headers=sent)
    return http.request(op.verb, path, json=payload if op.verb != "DELETE" else None, headers=sent)


def _pair(http: httpx.Client, calls: list[Callable[[], httpx.Response]]) -> list[httpx.Response]:
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return [f.result(timeout=120) for f in [pool.submit(c) for c in calls]]


def _body_of(r: httpx.Response) -> Any:
    try:
        return r.json()
    except ValueError:
        return r.text


def _same_key_findings(op: Operation, answers: list[httpx.Response]) -> list[Finding]:
    findings = []
    succeeded = [r for r in answers if r.status_code < 300]
    for r in answers:
        if r.status_code >= 500:
            findings.append(Finding(op.operation_id, "same key", f"{r.status_code} {r.text[:200]}"))
    if succeeded and len(succeeded) < len(answers):
        other = next(r for r in answers if r.status_code >= 300)
        in_flight = other.status_code == 409 and other.headers.get("x-should-retry") == "true"
        if not in_flight:
            findings.append(Finding(op.operation_id, "same key", f"a success and a {other.status_code} "
                                                                  f"{other.text[:200]} (one execution answers both)"))
    if len(succeeded) == 2 and _body_of(succeeded[0]) != _body_of(succeeded[1]):
        findings.append(Finding(op.operation_id, "same key", "two different successes: it ran twice"))
    return findings


def hunt(world: World, ops: list[Operation], rounds: int = 1) -> list[Finding]:
    """Every operation, `rounds` times: alone, then twice at once with one key, then with two; and
    every update or replace at once with the delete of its resource."""
    findings: list[Finding] = []
    for _ in range(rounds):
        for op in ops:
            findings += hunt_one(world, op)
        for writer, deleter in against_delete(ops):
            findings += hunt_against_delete(world, writer, deleter)
    return findings


def _settled_events(world: World, quiet: float = 0.15, deadline: float = 15.0) -> int:
    """The organization's event count once nothing adds to it for `quiet` seconds (0: not counted).

    The setup's resources (a persona made for a chat session's body, say) and the call itself
    emit some events from background work (a generation's steps), so a count read at once
    would charge one scenario with another's events."""
    if world.events is None:
        return 0
    count, give_up = world.events(), time.monotonic() + deadline
    while time.monotonic() < give_up:
        time.sleep(quiet)
        now = world.events()
        if now == count:
            break
        count = now
    return count


def hunt_one(world: World, op: Operation) -> list[Finding]:
    http, findings = world.http, []
    placed = world.resource(op)
    if placed is None:
        return []
    path, headers = placed
    payload = body(op, world)
    before = _settled_events(world)
    alone = _call(http, op, path, headers, payload, str(uuid.uuid4()))
    if alone.status_code >= 500:
        findings.append(Finding(op.operation_id, "alone", f"{alone.status_code} {alone.text[:200]}"))
    emitted = _settled_events(world) - before

    path, headers = _placed(world, op)
    key, payload = str(uuid.uuid4()), body(op, world)
    before = _settled_events(world)
    answers = _pair(http, [lambda: _call(http, op, path, headers, payload, key)] * 2)
    findings += _same_key_findings(op, answers)
    if world.events and alone.status_code < 300 and all(r.status_code < 300 for r in answers):
        twice = _settled_events(world) - before
        if twice != emitted:
            findings.append(Finding(op.operation_id, "same key", f"{twice} events where one call emits {emitted}"))

    # Two keys: the statuses two calls get one after the other, then at once (each on a fresh resource).
    path, headers = _placed(world, op)
    payload = body(op, world)
    serial = sorted(_call(http, op, path, headers, payload, str(uuid.uuid4())).status_code for _ in range(2))
    path, headers = _placed(world, op)
    payload = body(op, world)
    answers = _pair(http, [lambda: _call(http, op, path, headers, payload, str(uuid.uuid4()))] * 2)
    if sorted(r.status_code for r in answers) != serial:
        findings.append(Finding(op.operation_id, "different keys", f"{[r.status_code for r in answers]} where one "
                                f"after the other answers {serial}: {' | '.join(r.text[:160] for r in answers)}"))
    return findings


def against_delete(ops: list[Operation]) -> list[tuple[Operation, Operation]]:
    """(an update or replace, the delete) of one resource path."""
    deletes = {op.path: op for op in ops if op.verb == "DELETE" and "{" in op.path}
    return [(op, deletes[op.path]) for op in ops if op.verb in ("PATCH", "PUT") and op.path in deletes]


def hunt_against_delete(world: World, writer: Operation, deleter: Operation) -> list[Finding]:
    """The update and the delete at once answer as one of the two serial orders does."""
    http = world.http
    if world.resource(writer) is None:
        return []

    def statuses(concurrent: bool, delete_first: bool = False) -> tuple[int, int]:
        path, headers = _placed(world, writer)
        payload = body(writer, world)
        write = lambda: _call(http, writer, path, headers, payload, str(uuid.uuid4()))  # noqa: E731
        delete = lambda: _call(http, deleter, path, headers, None, str(uuid.uuid4()))  # noqa: E731
        if concurrent:
            answers = _pair(http, [write, delete])
        else:
            answers = [delete(), write()][::-1] if delete_first else [write(), delete()]
        return answers[0].status_code, answers[1].status_code

    orders = {statuses(False), statuses(False, delete_first=True)}
    seen = statuses(True)
    if seen not in orders:
        return [Finding(writer.operation_id, f"against {deleter.operation_id}",
                        f"(update, delete) answered {seen}; one after the other: {sorted(orders)}")]
    return []


def _placed(world: World, op: Operation) -> tuple[str, dict[str, str]]:
    placed = world.resource(op)
    assert placed is not None
    return placed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--admin-key")
    parser.add_argument("--seller-key")
    parser.add_argument("--database-url")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated operationIds")
    args = parser.parse_args()
    ops = [op for op in operations() if not args.only or op.operation_id in args.only.split(",")]
    with httpx.Client(base_url=args.url, timeout=60, limits=httpx.Limits(max_connections=16)) as http:
        world = World(http, args.key, args.admin_key, args.seller_key, events=_event_counter(args.database_url, http,
                                                                                              args.key))
        findings = hunt(world, ops, args.rounds)
    for finding in findings:
        print(finding)
    print(f"{len(ops)} operations, {args.rounds} rounds: {len(findings)} findings", file=sys.stderr)
    return 1 if findings else 0


def _event_counter(database_url: str | None, http: httpx.Client, key: str) -> Callable[[], int] | None:
    if not database_url:
        return None
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    org = http.get("/v1/keys", headers={"Authorization": f"Bearer {key}"}).headers.get("x-org-id", "")

    def count() -> int:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM events WHERE org_id = :o OR :o = ''"), {"o": org}).scalar_one()

    return count


if __name__ == "__main__":
    sys.exit(main())
