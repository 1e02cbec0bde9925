"""The race hunt: every write operation, two calls at once, through the edge.

The operation table is the protos' (scripts/contract_inputs.py): every write RPC, its HTTP binding and a
valid input built from its request message's field rules, on ids that a fixture of the aggregate it names
made fresh for the call (a chat session with one exchange, a webhook endpoint with a delivery, a persona,
a pending moderation review, ...). An operation is hunted when it reads an `Idempotency-Key` (a write that
is neither anonymous nor a stream: options.proto). For each, on a resource made fresh for the round:
- one call alone, to learn what it emits (events of the organization), and that its generated input
  reached a real resource (a 404 or a 422 is a finding: an input that misses its resource hunts nothing);
- two calls at once with the same key: no 5xx, one execution (a 2xx is
  answered identically to both, or the other is told the key is `in_flight`),
  and the events of one call, each once;
- two calls at once with different keys on one resource: the statuses two
  calls get one after the other (a success, or the documented refusal of
  the one that came second), never a 5xx;
- an update (PATCH, PUT) at once with the delete of its resource: the
  statuses of one of the two serial orders.
The other writes (streams) are called once each (`reach`): their input must reach a real resource too; the
writes called neither way are `NOT_CALLED`, each with why.
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # contract_inputs, when imported from a file
import contract_inputs  # noqa: E402
from contract_inputs import WriteRpc  # noqa: E402

SCIM_BASE = "/v1/auth/scim/v2"
SCIM_TYPE = "application/scim+json"
CONFIG_KEY = "engine.pipeline.audit.threshold"
# An intent the moderation blocks: its persona's create leaves a pending review item (tests/moderation).
BLOCKED_INTENT = "A persona who explains how to build a bomb"

# Write RPCs neither hunted nor reached here, with why (tests/scripts/test_contract_inputs.py keeps this exact).
NOT_CALLED = {
    # Anonymous: its body is the payment processor's event, signed with the processor's secret (no field rule
    # can build one); tests/billing/test_stripe.py races a redelivery and an older event against a newer one.
    "ReceiveStripeEvent",
}

# Where the kind a field names is not the caller's own resource of that kind (the contract cannot say whose).
KIND_OVERRIDES = {
    # A purchase buys another organization's published listing (one's own is refused).
    "PurchaseListing": {"listing": "seller_listing"},
}

# The order fixtures are made in: an aggregate's member before its root, whose fixture the member's makes too.
DEPTH = ("chat_message", "chat_session", "webhook_delivery", "webhook_endpoint", "portrait")


@dataclass(frozen=True)
class Operation:
    verb: str
    path: str  # the template, e.g. /v1/webhooks/{id}
    operation_id: str
    rpc: WriteRpc


def operations(rpcs: list[WriteRpc] | None = None) -> list[Operation]:
    """The write operations that read an Idempotency-Key, as the protos declare them."""
    return [Operation(r.verb, r.path, r.name, r) for r in rpcs or contract_inputs.write_rpcs() if r.idempotent]


def others(rpcs: list[WriteRpc] | None = None) -> list[Operation]:
    """The other write operations (streams) called once each by `reach`, bar `NOT_CALLED`."""
    return [
        Operation(r.verb, r.path, r.name, r)
        for r in rpcs or contract_inputs.write_rpcs()
        if not r.idempotent and r.name not in NOT_CALLED
    ]


def problems(rpcs: list[WriteRpc] | None = None) -> list[str]:
    """Why a write RPC has no input here: its body cannot be built from the contract, or it names a kind no
    fixture makes; and `NOT_CALLED` entries that are no write RPC (stale). Empty: every write has an input."""
    rpcs = contract_inputs.write_rpcs() if rpcs is None else rpcs
    found = [f"NOT_CALLED names {name}, which is no write RPC" for name in NOT_CALLED - {r.name for r in rpcs}]
    for op in operations(rpcs) + others(rpcs):
        try:
            kinds = {
                k: KIND_OVERRIDES.get(op.operation_id, {}).get(k, k)
                for k in contract_inputs.references(op.rpc).values()
            }
            contract_inputs.body(op.rpc, {k: f"<{k}>" for k in kinds})
        except contract_inputs.Unresolved as missing:
            found.append(str(missing))
            continue
        found += [
            f"{op.operation_id}: no fixture makes a {made}"
            for made in kinds.values()
            if not hasattr(World, f"_make_{made}")
        ]
    return found


@dataclass(frozen=True)
class Placed:
    """An operation's call on a fresh fixture: its path, its caller's headers and its body."""

    path: str
    headers: dict[str, str]
    payload: Any


@dataclass
class World:
    """The callers and a fixture per aggregate (`fixture`): the resources an operation acts on, made fresh."""

    http: httpx.Client
    key: str
    admin_key: str | None = None
    seller_key: str | None = None
    # Events of the organization so far (None: not counted).
    events: Callable[[], int] | None = None
    # A throwaway caller (an operation that erases its caller's data), or None: skipped.
    throwaway: Callable[[], str] | None = None
    _scim_token: str | None = None
    _org_id: str | None = field(default=None, repr=False)

    def auth(self, secret: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret or self.key}"}

    def ok(self, response: httpx.Response) -> dict[str, Any]:
        assert response.status_code in (200, 201), f"setup failed: {response.status_code} {response.text[:300]}"
        return response.json() if response.content else {}

    @property
    def scim_token(self) -> str:
        if self._scim_token is None:
            self._scim_token = self.create("CreateScimToken")["secret"]
        return self._scim_token

    def create(
        self,
        rpc: str,
        ids: dict[str, str] | None = None,
        state: dict[str, Any] | None = None,
        secret: str | None = None,
    ) -> dict[str, Any]:
        """A fixture's write (a creation, or the call that puts it in a state): the RPC's path and body from the
        contract (`contract_inputs.fixture_body`, with only `state` set over it: each caller says why), sent as
        the caller of `secret` (default the hunt's key; SCIM's writes with the hunt's SCIM token); its answer."""
        write = contract_inputs.named(rpc)
        ids = ids or {}
        sent = contract_inputs.fixture_body(write, ids, state)
        url = contract_inputs.path(write, ids)
        if url.startswith(SCIM_BASE):
            scim = {"Authorization": f"Bearer {self.scim_token}", "Content-Type": SCIM_TYPE}
            return self.ok(self.http.request(write.verb, url, content=json.dumps(sent), headers=scim))
        return self.ok(self.http.request(write.verb, url, json=sent, headers=self.auth(secret)))

    def persona(self, secret: str | None = None) -> dict[str, Any]:
        return self.create("CreatePersona", secret=secret)

    def resource(self, op: Operation) -> Placed | None:
        """The operation's call on a fresh fixture of what it names; None: not huntable here."""
        headers = self.auth()
        if op.path.startswith("/v1/admin/"):
            if self.admin_key is None:
                return None
            headers = self.auth(self.admin_key)
        if op.operation_id == "EraseMyData":
            if self.throwaway is None:
                return None
            headers = self.auth(self.throwaway())
        if op.path.startswith(SCIM_BASE):
            headers = {"Authorization": f"Bearer {self.scim_token}", "Content-Type": SCIM_TYPE, "Accept": SCIM_TYPE}
        kinds = KIND_OVERRIDES.get(op.operation_id, {})
        needed = {kinds.get(k, k) for k in contract_inputs.references(op.rpc).values()}
        if ("seller_listing" in needed and self.seller_key is None) or (
            "moderation_review" in needed and self.admin_key is None
        ):
            return None
        made = self.fixture(needed)
        ids = made | {kind: made[as_made] for kind, as_made in kinds.items() if as_made in made}
        if op.operation_id in STATES:
            STATES[op.operation_id](self, ids)
        return Placed(contract_inputs.path(op.rpc, ids), headers, contract_inputs.body(op.rpc, ids))

    def fixture(self, kinds: set[str]) -> dict[str, str]:
        """Fresh ids of each kind asked for (and of the aggregate's root a member's fixture makes with it)."""
        ids: dict[str, str] = {}
        for kind in sorted(kinds, key=lambda k: DEPTH.index(k) if k in DEPTH else len(DEPTH)):
            if kind not in ids:
                ids |= getattr(self, f"_make_{kind}")()
        return ids

    # A fixture per aggregate, `_make_<kind>`: the ids it made, by kind.

    def _make_persona(self) -> dict[str, str]:
        return {"persona": self.persona()["id"]}

    def _make_portrait(self) -> dict[str, str]:
        persona = self.persona()["id"]
        return {"persona": persona, "portrait": self.create("CreatePortrait", {"persona": persona})["id"]}

    def _make_chat_session(self) -> dict[str, str]:
        persona = self.persona()["id"]
        return {"persona": persona, "chat_session": self.create("CreateChatSession", {"persona": persona})["sessionId"]}

    def _make_chat_message(self) -> dict[str, str]:
        """A session with one exchange: its reply is the message (the last: regenerated, chosen, edited, deleted)."""
        ids = self._make_chat_session()
        return ids | {"chat_message": self.create("SendChatMessage", ids)["reply"]["id"]}

    def _make_webhook_endpoint(self) -> dict[str, str]:
        return {"webhook_endpoint": self.create("CreateWebhookEndpoint")["endpoint"]["id"]}

    def _make_webhook_delivery(self) -> dict[str, str]:
        """An endpoint with a delivery: its ping's, once the worker's fan-out has made it."""
        ids = self._make_webhook_endpoint()
        endpoint = ids["webhook_endpoint"]
        self.create("PingWebhookEndpoint", ids)
        items = _polled(
            lambda: self.ok(self.http.get(f"/v1/webhooks/{endpoint}/deliveries", headers=self.auth()))["items"]
        )
        return ids | {"webhook_delivery": items[0]["id"]}

    def _make_api_key(self) -> dict[str, str]:
        return {"api_key": self.create("CreateApiKey")["key"]["id"]}

    def _make_scim_token(self) -> dict[str, str]:
        made = self.create("CreateScimToken")
        return {"scim_token": made["token"]["id"] if "token" in made else made["id"]}

    def _make_scim_user(self) -> dict[str, str]:
        return {"scim_user": self.create("CreateScimUser")["id"]}

    def _make_scim_group(self) -> dict[str, str]:
        return {"scim_group": self.create("CreateScimGroup")["id"]}

    def _make_listing(self) -> dict[str, str]:
        return {"listing": self._listing_of(self.key)["id"]}

    def _make_seller_listing(self) -> dict[str, str]:
        return {"seller_listing": self._seller_listing()["id"]}

    def _make_config_item(self) -> dict[str, str]:
        return {"config_item": CONFIG_KEY}

    def _make_moderation_review(self) -> dict[str, str]:
        """A pending review item: the one a blocked persona create leaves in the organization's queue."""
        assert self.admin_key is not None
        # State: an intent the moderation blocks (the generator's is harmless), so that a review item is left.
        sent = contract_inputs.fixture_body(contract_inputs.named("CreatePersona"), {}, {"intent": BLOCKED_INTENT})
        blocked = self.http.post("/v1/personas", json=sent, headers=self.auth())
        assert blocked.status_code == 422, f"setup failed: {blocked.status_code} {blocked.text[:300]}"
        queue = self.ok(
            self.http.get(
                "/v1/admin/moderation/queue",
                params={"orgId": self.org_id, "limit": 100},
                headers=self.auth(self.admin_key),
            )
        )["items"]
        pending = [item for item in queue if item["status"] == "pending"]
        assert pending, f"setup failed: no pending review in {queue}"
        return {"moderation_review": max(pending, key=lambda item: item["createdAt"])["id"]}

    @property
    def org_id(self) -> str:
        if self._org_id is None:
            # (the subscription names its organization: the hunt's is on a paid plan)
            self._org_id = self.ok(self.http.get("/v1/billing/subscription", headers=self.auth()))["orgId"]
        return self._org_id

    def _listing_of(self, secret: str) -> dict[str, Any]:
        persona = self.persona(secret)["id"]
        return self.create("CreateListing", {"persona": persona}, secret=secret)

    def _seller_listing(self) -> dict[str, Any]:
        """A listing of the seller's, published (its review runs in the background)."""
        assert self.seller_key is not None
        listing = self._listing_of(self.seller_key)
        deadline = time.monotonic() + 15
        while listing["status"] == "pending_review" and time.monotonic() < deadline:
            time.sleep(0.05)
            listing = self.ok(
                self.http.get(f"/v1/marketplace/listings/{listing['id']}", headers=self.auth(self.seller_key))
            )
        return listing


def _polled(read: Callable[[], list[Any]], deadline: float = 30.0) -> list[Any]:
    """What `read` returns once it is not empty (background work makes it)."""
    give_up = time.monotonic() + deadline
    while not (found := read()):
        assert time.monotonic() < give_up, "setup failed: the background work never made it"
        time.sleep(0.05)
    return found


# The state an operation acts on where a fresh fixture is not in it: the call that puts the fixture there (a
# call alone in another state is refused, 409, and the hunt would try nothing but the refusal).
STATES: dict[str, Callable[[World, dict[str, str]], Any]] = {
    # The organization's one subscription, put back each time: resumed before a cancel, cancelled before a resume.
    "CancelSubscription": lambda w, ids: w.http.post("/v1/billing/subscription/resume", json={}, headers=w.auth()),
    "ResumeSubscription": lambda w, ids: w.http.post("/v1/billing/subscription/cancel", json={}, headers=w.auth()),
    # Only a deleted persona is restored.
    "RestorePersona": lambda w, ids: w.ok(w.http.delete(f"/v1/personas/{ids['persona']}", headers=w.auth())),
    # The generated rollback is to version 1 (the smallest allowed): a persona at version 2, refined once.
    "RollbackPersona": lambda w, ids: w.ok(
        w.http.post(f"/v1/personas/{ids['persona']}/refine", json={"instruction": "A little warmer"}, headers=w.auth())
    ),
}


@dataclass
class Finding:
    operation: str
    scenario: str
    what: str

    def __str__(self) -> str:
        return f"{self.operation} [{self.scenario}]: {self.what}"


def _call(http: httpx.Client, op: Operation, placed: Placed, key: str) -> httpx.Response:
    sent = {**placed.headers, "Idempotency-Key": key}
    if placed.path.startswith(SCIM_BASE):
        return http.request(
            op.verb, placed.path, content=None if placed.payload is None else json.dumps(placed.payload), headers=sent
        )
    return http.request(op.verb, placed.path, json=placed.payload, headers=sent)


def _missed(op: Operation, status: int, text: str) -> list[Finding]:
    """A call alone refused: a 404 (no real resource) or a 422 (its generated input refused) means the input
    generator (scripts/contract_inputs.py) or the operation's fixture is wrong; another 4xx (a 409) that the
    fixture is not in a state the operation acts on (`STATES`). Either way the hunt would try only a refusal."""
    if status in (404, 422):
        return [Finding(op.operation_id, "alone", f"{status}: its input reached no real resource: {text[:300]}")]
    if 400 <= status < 500:
        return [Finding(op.operation_id, "alone", f"{status}: refused in its fixture's state: {text[:300]}")]
    return []


def reach(world: World, op: Operation) -> list[Finding]:
    """A write that is not hunted (a stream) called once on a fresh fixture: its input reaches a real resource
    (a stream's in-band error counts as its status) and it answers no 5xx."""
    placed = world.resource(op)
    if placed is None:
        return []
    with world.http.stream(op.verb, placed.path, json=placed.payload, headers=placed.headers) as r:
        text = r.read().decode(errors="replace")
    status = r.status_code
    errors = [line for line in text.splitlines() if line.startswith("data: ") and '"error"' in line]
    if status == 200 and errors:  # the stream started, then ended in an error: its code's status
        status = contract_inputs.error_statuses().get(json.loads(errors[0][6:]).get("error", {}).get("code", ""), 500)
    told = errors[0] if errors else text[:300]
    if status >= 500:
        return [Finding(op.operation_id, "alone", f"{status} {told}")]
    return _missed(op, status, told)


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
            findings.append(
                Finding(
                    op.operation_id,
                    "same key",
                    f"a success and a {other.status_code} {other.text[:200]} (one execution answers both)",
                )
            )
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
    before = _settled_events(world)
    alone = _call(http, op, placed, str(uuid.uuid4()))
    if alone.status_code >= 500:
        findings.append(Finding(op.operation_id, "alone", f"{alone.status_code} {alone.text[:200]}"))
    findings += _missed(op, alone.status_code, alone.text)
    emitted = _settled_events(world) - before

    once, key = _placed(world, op), str(uuid.uuid4())
    before = _settled_events(world)
    answers = _pair(http, [lambda: _call(http, op, once, key)] * 2)
    findings += _same_key_findings(op, answers)
    if world.events and alone.status_code < 300 and all(r.status_code < 300 for r in answers):
        twice = _settled_events(world) - before
        if twice != emitted:
            findings.append(Finding(op.operation_id, "same key", f"{twice} events where one call emits {emitted}"))

    # Two keys: the statuses two calls get one after the other, then at once (each on a fresh resource).
    one_after = _placed(world, op)
    serial = sorted(_call(http, op, one_after, str(uuid.uuid4())).status_code for _ in range(2))
    at_once = _placed(world, op)
    answers = _pair(http, [lambda: _call(http, op, at_once, str(uuid.uuid4()))] * 2)
    if sorted(r.status_code for r in answers) != serial:
        findings.append(
            Finding(
                op.operation_id,
                "different keys",
                f"{[r.status_code for r in answers]} where one "
                f"after the other answers {serial}: {' | '.join(r.text[:160] for r in answers)}",
            )
        )
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
        placed = _placed(world, writer)
        deleting = Placed(placed.path, placed.headers, None)
        write: Callable[[], httpx.Response] = lambda: _call(http, writer, placed, str(uuid.uuid4()))  # noqa: E731
        delete: Callable[[], httpx.Response] = lambda: _call(http, deleter, deleting, str(uuid.uuid4()))  # noqa: E731
        if concurrent:
            answers = _pair(http, [write, delete])
        else:
            answers = [delete(), write()][::-1] if delete_first else [write(), delete()]
        return answers[0].status_code, answers[1].status_code

    orders = {statuses(False), statuses(False, delete_first=True)}
    seen = statuses(True)
    if seen not in orders:
        return [
            Finding(
                writer.operation_id,
                f"against {deleter.operation_id}",
                f"(update, delete) answered {seen}; one after the other: {sorted(orders)}",
            )
        ]
    return []


def _placed(world: World, op: Operation) -> Placed:
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
        world = World(
            http, args.key, args.admin_key, args.seller_key, events=_event_counter(args.database_url, http, args.key)
        )
        findings = hunt(world, ops, args.rounds)
        streams = [op for op in others() if not args.only or op.operation_id in args.only.split(",")]
        findings += [f for op in streams for f in reach(world, op)]
    for finding in findings:
        print(finding)
    print(
        f"{len(ops)} operations, {args.rounds} rounds, {len(streams)} streams called once: {len(findings)} findings",
        file=sys.stderr,
    )
    return 1 if findings else 0


def _event_counter(database_url: str | None, http: httpx.Client, key: str) -> Callable[[], int] | None:
    if not database_url:
        return None
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    org = World(http, key).org_id

    def count() -> int:
        with engine.connect() as conn:
            found: int = conn.execute(
                text("SELECT count(*) FROM events WHERE org_id = :o OR :o = ''"), {"o": org}
            ).scalar_one()
            return found

    return count


if __name__ == "__main__":
    sys.exit(main())
