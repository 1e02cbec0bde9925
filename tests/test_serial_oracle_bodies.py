"""Every body an oracle table sends is valid per the contract, and a required field added to a request message is
filled in every oracle pair (tests/oracle.py's `body`: the generator's body, scripts/contract_inputs.py, with a
table's distinguishing fields over it).

No stack: each table is built with a recording client (every call answers 400 with an empty error, so that an
operation that reads its outcome stops at once) and each of its operations is called on a stand-in fixture whose
every attribute is a placeholder id. Each request sent is matched to the write RPC of its verb and path, and its
body judged by the contract's field rules (`contract_inputs.invalid`). The planted case builds the descriptors
with a new required field in webhooks.proto's update request and sees the webhook tables send it.

The fixtures that make each aggregate are judged the same way: each table's `make` and each of the race hunt's
`_make_<kind>` run against a client that answers every write as made (`Granting`), and a required field planted in
the creation requests (a persona, a chat session and its messages, a webhook endpoint and its ping, a listing, an API
key, a SCIM token, a portrait) is sent by every fixture that makes one."""

from __future__ import annotations

import inspect
import json
import re
import sys
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from oracle import ROOT, body, contract, fixture_body, table_builders
from persona.v1 import options_pb2

READS = {"GET", "HEAD"}


class Placeholder(str):
    """A fixture, tenant, engine or id: every attribute and item is another, it formats as `x`, and it spreads as
    no headers (`{**f.auth}`)."""

    def __new__(cls) -> Placeholder:
        return super().__new__(cls, "x")

    def __getattr__(self, name: str) -> Placeholder:
        if name.startswith("__"):
            raise AttributeError(name)
        return Placeholder()

    def __getitem__(self, key: Any) -> Placeholder:  # type: ignore[override]
        return Placeholder()

    def keys(self) -> list[str]:
        return []

    def __call__(self, *args: Any, **kwargs: Any) -> Placeholder:  # (a tenant factory, a receiver's `url`)
        return Placeholder()

    def __enter__(self) -> Placeholder:  # (an engine's connection)
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class Refused:
    """Every answer: 400 with an empty error (an operation that reads its outcome stops at once)."""

    status_code = 400
    text = '{"error": {}}'

    def json(self) -> dict[str, Any]:
        return {"error": {}}

    def read(self) -> bytes:
        return self.text.encode()

    def iter_lines(self) -> list[str]:
        return []

    def __enter__(self) -> Refused:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class Recorder:
    """An httpx.Client stand-in that keeps (verb, path, body) of each request."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []

    def request(self, method: str, url: str, *, json: Any = None, content: Any = None, **_: Any) -> Refused:
        self.sent.append((method.upper(), url.split("?")[0], _decoded(content) if content is not None else json))
        return Refused()

    def stream(self, method: str, url: str, **kwargs: Any) -> Refused:
        return self.request(method, url, **kwargs)

    def get(self, url: str, **kwargs: Any) -> Refused:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> Refused:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> Refused:
        return self.request("PUT", url, **kwargs)

    def patch(self, url: str, **kwargs: Any) -> Refused:
        return self.request("PATCH", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> Refused:
        return self.request("DELETE", url, **kwargs)


STATUSES = {"/marketplace/": "published", "/moderation/": "pending"}


class Made(dict):
    """What a made resource answers: any field asked for is there (an id `x`; lists of one; a listing published, a
    portrait generated, a persona at version 2, a completions session, as the fixtures wait for)."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def __bool__(self) -> bool:  # (a fixture waiting for it: there)
        return True

    def __missing__(self, key: str) -> Any:
        if key == "items":
            return [Made(self.url)]
        if key == "status":  # (a listing's review settled, a portrait rendered, a review item waiting)
            return next((status for part, status in STATUSES.items() if part in self.url), "generated")
        if key == "version":
            return 2
        if key == "title":
            return "chat.completions"
        return Made(self.url) if key in ("reply", "endpoint", "key", "token", "userMessage") else "x"


class Answered:
    text = content = "{}"

    def __init__(self, url: str) -> None:
        self.url = url
        self.status_code = 201 if "/scim/v2/" in url else 200  # (SCIM answers a creation 201)

    def json(self) -> Made:
        return Made(self.url)


class Granting(Recorder):
    """A recording client whose every call is answered as made (a fixture runs to its end)."""

    def request(self, method: str, url: str, *, json: Any = None, content: Any = None, **_: Any) -> Any:
        super().request(method, url, json=json, content=content)
        return Answered(url)


def _decoded(content: Any) -> Any:
    return json.loads(content) if isinstance(content, str | bytes) else content


def _argument(name: str, annotation: Any, http: Recorder, flag: bool) -> Any:
    if name == "http":
        return http
    if name == "scim":  # (tests/scim's client, imported by its tables as table_builders loaded them)
        return sys.modules["scim_client"].Scim(http, "x")
    return flag if annotation in ("bool", bool) else Placeholder()


def _parameters(build: Any) -> list[inspect.Parameter]:
    """A builder's parameters a caller must give (the erasure table's `prepare` has a default)."""
    return [p for p in inspect.signature(build).parameters.values() if p.default is inspect.Parameter.empty]


def _sent_by_each_op() -> list[tuple[str, str, list[tuple[str, str, Any]]]]:
    """(table file, operation, requests it sent) of every operation of every table, each state a builder's flags
    pick (its bool parameters, both ways)."""
    found = []
    for path, build in table_builders():
        params = _parameters(build)
        for flag in (False, True):
            http = Recorder()
            table = build(*[_argument(p.name, p.annotation, http, flag) for p in params])
            for op in table.ops:
                before = len(http.sent)
                op.call(Placeholder())
                found.append((str(path.relative_to(ROOT)), op.name, http.sent[before:]))
    return found


def _rpc_of(method: str, url: str, sent: Any, rpcs: list[Any]) -> Any:
    matches = [r for r in rpcs if r.verb == method and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", r.path), url)]
    assert len(matches) == 1, f"{method} {url}: {len(matches)} write RPCs of this verb and path"
    if matches[0].name == "CreateChatCompletion" and isinstance(sent, dict) and sent.get("stream"):
        # openai.proto: with `"stream": true` the edge routes the request to StreamChatCompletion (one request type).
        return next(r for r in rpcs if r.name == "StreamChatCompletion")
    return matches[0]


def _invalid_bodies(rpcs: list[Any]) -> list[str]:
    wrong = []
    for table, op, sent in _sent_by_each_op():
        for method, url, sent_body in sent:
            if method not in READS:
                rpc = _rpc_of(method, url, sent_body, rpcs)
                wrong += [f"{table} {op}: {rpc.name}: {problem}" for problem in contract().invalid(rpc, sent_body)]
    return wrong


def test_every_body_an_oracle_table_sends_is_valid_per_the_contract():
    assert _invalid_bodies(contract().write_rpcs()) == []


def test_each_operation_calls_the_write_rpc_it_names():
    """The recording reaches every operation's request (a table whose operation sent nothing, or another RPC than
    it names, would be judged on nothing)."""
    rpcs = contract().write_rpcs()
    named = {
        (str(path.relative_to(ROOT)), op.name): op.rpc
        for path, build in table_builders()
        for op in build(*[None] * len(_parameters(build))).ops
    }
    called: dict[tuple[str, str], set[str]] = {}
    for table, op, sent in _sent_by_each_op():
        called.setdefault((table, op), set()).update(_rpc_of(m, u, b, rpcs).name for m, u, b in sent if m not in READS)
    assert named and {key: rpc for key, rpc in named.items() if rpc and rpc not in called.get(key, set())} == {}


def _planted() -> list[Any]:
    """The write RPCs with webhooks.proto's UpdateWebhookEndpointRequest given a new required string `label`,
    built in a pool of their own from the checked-in descriptor set (gen/descriptor.binpb)."""
    files = descriptor_pb2.FileDescriptorSet.FromString((ROOT / "gen" / "descriptor.binpb").read_bytes()).file
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        if file.name == "persona/v1/webhooks.proto":
            message = next(m for m in file.message_type if m.name == "UpdateWebhookEndpointRequest")
            field = message.field.add(
                name="label",
                number=99,
                json_name="label",
                type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
            )
            field.options.Extensions[options_pb2.rules].required = True
        pool.Add(file)
    return contract().write_rpcs([pool.FindFileByName(f.name) for f in files if f.package == "persona.v1"])


def test_a_required_field_added_to_a_request_is_filled_in_every_oracle_pair(monkeypatch):
    planted = _planted()
    update = next(r for r in planted if r.name == "UpdateWebhookEndpoint")
    # A hand-written body, as the tables had, would now be refused by the service; the contract says so.
    assert contract().invalid(update, {"description": "renamed", "enabled": False}) == ["label: required"]
    sent = body(
        "UpdateWebhookEndpoint",
        distinguishing={"description": "renamed", "enabled": False},
        rpcs={r.name: r for r in planted},
    )
    assert sent["label"] and sent["description"] == "renamed" and sent["enabled"] is False
    # Every table's every body under the planted contract: the webhook tables' PATCHes carry the new field.
    monkeypatch.setattr("oracle._write_rpcs", lambda: {r.name: r for r in planted})
    assert _invalid_bodies(planted) == []
    patches = [b for table, _, sent_ in _sent_by_each_op() if "webhooks" in table for m, _, b in sent_ if m == "PATCH"]
    assert len(patches) >= 2 and all(b.get("label") for b in patches)


@pytest.mark.parametrize("distinguishing", [{"decision": "maybe"}, {"verdict": "approve"}])
def test_a_distinguishing_field_the_contract_refuses_is_never_sent(distinguishing):
    """An override outside its field's rules (a value not allowed, a field the request does not have)."""
    with pytest.raises(AssertionError, match="breaks the contract"):
        body("ResolveModerationReview", distinguishing=distinguishing)


CREATIONS = ("CreatePersona", "CreateChatSession", "SendChatMessage", "RegenerateChatMessage", "CreateWebhookEndpoint",
             "PingWebhookEndpoint", "CreateListing", "CreateApiKey", "CreateScimToken", "CreatePortrait",
             "UpdateConfigItem", "CreatePrivacyExport", "CreateChatCompletion")


def _planted_in(names: tuple[str, ...]) -> list[Any]:
    """The write RPCs with a new required string `label` in the request message of each RPC of `names`."""
    files = descriptor_pb2.FileDescriptorSet.FromString((ROOT / "gen" / "descriptor.binpb").read_bytes()).file
    requests = {f"{r.request.full_name}" for r in contract().write_rpcs() if r.name in names}
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        for message in file.message_type:
            if f"{file.package}.{message.name}" in requests:
                field = message.field.add(name="label", number=99, json_name="label",
                                          type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                                          label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
                field.options.Extensions[options_pb2.rules].required = True
        pool.Add(file)
    return contract().write_rpcs([pool.FindFileByName(f.name) for f in files if f.package == "persona.v1"])


def _fixture_writes(rpcs: list[Any]) -> dict[str, list[tuple[str, Any]]]:
    """Every write each table's fixture (`make`, each state a builder's flags pick) sends, as (RPC, body), by table
    file and name; a fixture that stops early (a shape the stand-in answer lacks) counts what it sent before."""
    found: dict[str, list[tuple[str, Any]]] = {}
    for path, build in table_builders():
        for flag in (False, True):
            http = Granting()
            table = build(*[_argument(p.name, p.annotation, http, flag) for p in _parameters(build)])
            try:
                table.make()
            except Exception as stopped:  # noqa: BLE001 (what it sent before is judged; the stop is reported)
                found.setdefault(f"stopped: {path.name} {table.name}: {stopped!r}", [])
            found.setdefault(f"{path.relative_to(ROOT)} {table.name}", []).extend(
                (_rpc_of(m, u, b, rpcs).name, b) for m, u, b in http.sent if m not in READS)
    return found


def _race_hunt() -> Any:
    import importlib.util

    contract()  # (the one contract_inputs module, which the race hunt imports)
    spec = importlib.util.spec_from_file_location("race_hunt", ROOT / "scripts" / "race_hunt.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules["race_hunt"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hunt_fixture_writes(rpcs: list[Any]) -> dict[str, list[tuple[str, Any]]]:
    """Every write each of the race hunt's fixtures (`World._make_<kind>`) sends, as (RPC, body), by kind."""
    race_hunt = _race_hunt()
    found = {}
    for kind in sorted(name[len("_make_"):] for name in vars(race_hunt.World) if name.startswith("_make_")):
        http = Granting()
        world = race_hunt.World(http, "k", seller_key="s")
        if kind == "moderation_review":
            world.admin_key = "a"
            http.request = _blocked(http)  # type: ignore[method-assign]  (a blocked create answers 422)
        getattr(world, f"_make_{kind}")()
        found[kind] = [(_rpc_of(m, u, b, rpcs).name, b) for m, u, b in http.sent if m not in READS]
    return found


def _blocked(http: Granting) -> Any:
    made = http.request

    def request(method: str, url: str, **kwargs: Any) -> Any:
        answer = made(method, url, **kwargs)
        if method == "POST" and url == "/v1/personas":
            answer.status_code = 422
        return answer
    return request


def test_every_body_a_fixture_sends_is_valid_per_the_contract():
    rpcs = {r.name: r for r in contract().write_rpcs()}
    sent = {**_fixture_writes(list(rpcs.values())), **_hunt_fixture_writes(list(rpcs.values()))}
    wrong = [f"{where}: {rpc}: {p}" for where, writes in sent.items() for rpc, b in writes
             for p in contract().invalid(rpcs[rpc], b)]
    assert wrong == []
    # Each table's fixture ran to its end (none stopped on the stand-in's answers, so every write it sends is seen).
    assert [where for where in sent if where.startswith("stopped")] == []


def test_a_required_field_added_to_a_creation_request_is_sent_by_every_fixture(monkeypatch):
    """Planted: a required `label` in each creation request the fixtures send. Every fixture write to one of them
    carries it (none is hand-written), every fixture body is valid under the planted contract, and each creation is
    sent by some fixture (the check is not empty)."""
    planted = _planted_in(CREATIONS)
    by_name = {r.name: r for r in planted}
    # A hand-written creation body, as the fixtures had, would now be refused by the service; the contract says so.
    assert contract().invalid(by_name["CreatePersona"], {"intent": "A patient ferry captain"}) == ["label: required"]
    monkeypatch.setattr("oracle._write_rpcs", lambda: by_name)
    monkeypatch.setattr(contract(), "write_rpcs", lambda files=None: planted)
    sent = {**_fixture_writes(planted), **_hunt_fixture_writes(planted)}
    writes = [(where, rpc, b) for where, found in sent.items() for rpc, b in found]
    assert [(where, rpc) for where, rpc, b in writes if rpc in CREATIONS and not b.get("label")] == []
    assert [(where, rpc, p) for where, rpc, b in writes for p in contract().invalid(by_name[rpc], b)] == []
    assert {rpc for _, rpc, _ in writes} >= set(CREATIONS)
    # The race hunt's aggregates each made through one of them: a persona, a session with an exchange, an endpoint.
    assert {rpc for rpc, _ in sent["persona"]} == {"CreatePersona"}
    assert [rpc for rpc, _ in sent["chat_message"]] == ["CreatePersona", "CreateChatSession", "SendChatMessage"]


@pytest.mark.parametrize(
    ("rpc", "sent"),
    [("UpdatePersona", {"slug": "Not A Slug"}), ("CreateApiKey", {"ipAllowlist": ["203.0.113.0/33"]}),
     ("CreateApiKey", {"scopes": ["chat:read", "chat:read"]})],
    ids=["bad-slug", "bad-cidr", "repeated-scope"],
)
def test_a_body_outside_a_format_or_with_repeated_items_is_never_sent(rpc, sent):
    """Planted: a value the service's validator refuses for its `format` or `unique` rule, set by an operation's
    distinguishing fields or a fixture's state, is refused before it is sent."""
    with pytest.raises(AssertionError, match="breaks the contract"):
        body(rpc, distinguishing=sent)
    with pytest.raises(AssertionError, match="breaks the contract"):
        fixture_body(rpc, state=sent)
