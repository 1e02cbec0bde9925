"""The race hunt's inputs come from the contract (scripts/contract_inputs.py): every write RPC in the protos has
one (a body built from its request message's field rules, on ids of the kinds it names, each kind made by a
fixture of scripts/race_hunt.py's World) or is listed in `NOT_CALLED` with why. A write RPC or a required field
added to the protos is hunted or noticed: planted here in a test-only copy of the descriptors (no stack; whether
each input then reaches a real resource is tests/scripts/test_race_hunt.py's, by calling it once alone)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2, descriptor_pool
from persona.v1 import options_pb2
from support import ROOT


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


race_hunt = _script("race_hunt")
contract_inputs = sys.modules["contract_inputs"]  # (imported by the race hunt)


def _planted(change) -> list:
    """The write RPCs of the protos with webhooks.proto changed by `change(file)` (a FileDescriptorProto), built
    in a pool of their own from the checked-in descriptor set (gen/descriptor.binpb)."""
    files = descriptor_pb2.FileDescriptorSet.FromString((ROOT / "gen" / "descriptor.binpb").read_bytes()).file
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        if file.name == "persona/v1/webhooks.proto":
            change(file)
        pool.Add(file)
    return contract_inputs.write_rpcs([pool.FindFileByName(f.name) for f in files if f.package == "persona.v1"])


def _rpc(file, name: str, path: str, request: str) -> None:
    """A write RPC `name`, POST `path`, taking `request` (a message of the file)."""
    method = file.service[0].method.add(
        name=name, input_type=f".persona.v1.{request}", output_type=".persona.v1.WebhookEndpoint"
    )
    method.options.Extensions[options_pb2.policy].write = True
    method.options.Extensions[options_pb2.policy].scope = "config:write"
    method.options.Extensions[annotations_pb2.http].post = path
    method.options.Extensions[annotations_pb2.http].body = "*"


def _required(file, message: str, name: str, kind=descriptor_pb2.FieldDescriptorProto.TYPE_STRING) -> None:
    """A required field `name` added to `message`."""
    found = next(m for m in file.message_type if m.name == message)
    field = found.field.add(
        name=name,
        number=99 + len(found.field),
        type=kind,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        json_name=name,
    )
    if kind == descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE:
        field.type_name = ".google.protobuf.Value"
    field.options.Extensions[options_pb2.rules].required = True


def test_every_write_rpc_has_an_input_or_a_reason():
    assert race_hunt.problems() == []
    names = {rpc.name for rpc in contract_inputs.write_rpcs()}
    called = {op.operation_id for op in race_hunt.operations() + race_hunt.others()}
    assert called | race_hunt.NOT_CALLED == names and not called & race_hunt.NOT_CALLED


def test_the_inputs_follow_the_field_rules():
    """Spot checks of what the rules give: an enum's first value by its wire name, the smallest allowed number,
    names resolved to the fixture's ids by the collection before them."""
    rpcs = {rpc.name: rpc for rpc in contract_inputs.write_rpcs()}
    ids = {"persona": "per_1", "chat_session": "ses_1", "chat_message": "msg_1", "moderation_review": "rev_1"}
    assert contract_inputs.body(rpcs["ResolveModerationReview"], ids) == {"decision": "approve"}
    assert contract_inputs.body(rpcs["RollbackPersona"], ids) == {"version": 1}
    assert contract_inputs.body(rpcs["ChooseChatMessage"], ids) == {"swipeIndex": 0}
    assert contract_inputs.path(rpcs["ChooseChatMessage"], ids) == "/v1/chat/sessions/ses_1/messages/msg_1/choose"
    assert contract_inputs.body(rpcs["CreateChatSession"], ids) == {"personaId": "per_1"}


def test_a_new_write_rpc_is_hunted_with_a_generated_input():
    rpcs = _planted(_with_message)
    ops = {op.operation_id: op for op in race_hunt.operations(rpcs)}
    assert "SilenceWebhookEndpoint" in ops and race_hunt.problems(rpcs) == []
    placed = contract_inputs.body(ops["SilenceWebhookEndpoint"].rpc, {"webhook_endpoint": "whe_1"})
    assert placed == {"minutes": 5, "reason": placed["reason"]} and placed["reason"]


def _with_message(file) -> None:
    """A request message with a required number (min 5) and a required string, and the RPC taking it."""
    message = file.message_type.add(name="SilenceWebhookEndpointRequest")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, json_name="id")
    _rpc(file, "SilenceWebhookEndpoint", "/v1/webhooks/{id}/silence", "SilenceWebhookEndpointRequest")
    minutes = message.field.add(
        name="minutes", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32, json_name="minutes"
    )
    minutes.options.Extensions[options_pb2.rules].required = True
    minutes.options.Extensions[options_pb2.rules].min_value = 5
    _required(file, "SilenceWebhookEndpointRequest", "reason")


@pytest.mark.parametrize(
    ("plant", "noticed"),
    [
        (
            lambda f: _rpc(f, "ArchiveTeam", "/v1/teams/{id}/archive", "PingWebhookEndpointRequest"),
            "ArchiveTeam: id: a parameter after /teams/ names no kind",
        ),
        (
            lambda f: _required(f, "PingWebhookEndpointRequest", "team_id"),
            "PingWebhookEndpoint: team_id: no collection teams names a kind",
        ),
        (
            lambda f: _required(
                f, "PingWebhookEndpointRequest", "threshold", descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
            ),
            "PingWebhookEndpoint: threshold: a google.protobuf.Value has no shape in the contract",
        ),
    ],
    ids=["rpc-of-an-unknown-kind", "required-name-of-an-unknown-kind", "required-value-of-no-shape"],
)
def test_what_the_contract_cannot_fill_is_noticed(plant, noticed):
    assert [p.split(".", 1)[-1] for p in race_hunt.problems(_planted(plant))] == [noticed]


def test_a_new_required_field_is_filled():
    rpcs = {rpc.name: rpc for rpc in _planted(lambda f: _required(f, "PingWebhookEndpointRequest", "reason"))}
    assert set(contract_inputs.body(rpcs["PingWebhookEndpoint"], {"webhook_endpoint": "whe_1"})) == {"reason"}


def test_a_stale_reason_is_noticed(monkeypatch):
    monkeypatch.setattr(race_hunt, "NOT_CALLED", race_hunt.NOT_CALLED | {"RetiredRpc"})
    assert race_hunt.problems() == ["NOT_CALLED names RetiredRpc, which is no write RPC"]


def _ruled(file, message: str, name: str, repeated: bool = False, **rules) -> None:
    """A required string field `name` (a list: `repeated`) with the field rules `rules`, added to `message`."""
    _required(file, message, name)
    field = next(m for m in file.message_type if m.name == message).field[-1]
    if repeated:
        field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    for rule, value in rules.items():
        if isinstance(value, list):
            getattr(field.options.Extensions[options_pb2.rules], rule).extend(value)
        else:
            setattr(field.options.Extensions[options_pb2.rules], rule, value)


@pytest.mark.parametrize(
    ("rpc", "sent", "refused"),
    [
        ("UpdatePersona", {"slug": "Not A Slug"}, "slug: 'Not A Slug' is not a slug"),
        ("UpdatePersona", {"slug": "-edge-"}, "slug: '-edge-' is not a slug"),
        ("CreateApiKey", {"ipAllowlist": ["203.0.113.0/24", "203.0.113.0/33"]}, "is not a cidr"),
        ("CreateApiKey", {"scopes": ["chat:read", "chat:read"]}, "scopes[1]: 'chat:read' again"),
        ("CreateWebhookEndpoint", {"events": ["persona.created", "persona.created"]}, "events[1]"),
        ("UpdateListing", {"audienceTags": [f"t{i}" for i in range(11)]}, "audienceTags: 11 items"),
    ],
    ids=["slug-spaces", "slug-edge-hyphens", "cidr-prefix", "unique-scopes", "unique-events", "list-max-items"],
)
def test_a_value_outside_its_format_or_a_repeated_item_is_refused_before_it_is_sent(rpc, sent, refused):
    """Planted: a body the service would refuse for a field's `format` (cidr, slug, as its validator checks them) or
    `unique` items (or a list longer than its `max_len` in items) is refused by the contract's reading too, so
    `fixture_body` (and the oracle's `body`) stop before sending it; the generated body alone passes."""
    write = contract_inputs.named(rpc)
    ids = {kind: "x" for kind in contract_inputs.references(write).values()}
    assert contract_inputs.invalid(write, contract_inputs.body(write, ids)) == []
    assert any(
        refused in problem for problem in contract_inputs.invalid(write, {**contract_inputs.body(write, ids), **sent})
    )
    with pytest.raises(contract_inputs.Refused, match="breaks the contract"):
        contract_inputs.fixture_body(write, ids, sent)


def test_a_generated_value_keeps_its_format_and_unique_items():
    """Planted: required fields of each rule in the ping's request (a slug of at most 12 characters, a list of at
    least 2 unique CIDR ranges, a list of 3 unique allowed values): the generated body keeps every rule, and the
    service's own formats accept its values."""
    from persona_service.kernel.transport.validation import FORMATS

    def plant(file) -> None:
        _ruled(file, "PingWebhookEndpointRequest", "handle", format="slug", max_len=12)
        _ruled(file, "PingWebhookEndpointRequest", "ranges", repeated=True, format="cidr", unique=True, min_len=2)
        _ruled(
            file,
            "PingWebhookEndpointRequest",
            "colours",
            repeated=True,
            unique=True,
            min_len=3,
            one_of=["red", "green", "blue", "grey"],
        )

    ping = next(r for r in _planted(plant) if r.name == "PingWebhookEndpoint")
    sent = contract_inputs.body(ping, {"webhook_endpoint": "whe_1"})
    assert contract_inputs.invalid(ping, sent) == []
    assert FORMATS["slug"](sent["handle"]) and len(sent["handle"]) <= 12
    assert len(set(sent["ranges"])) == len(sent["ranges"]) >= 2 and all(map(FORMATS["cidr"], sent["ranges"]))
    assert sent["colours"] == ["red", "green", "blue"]
    # Each rule read the other way: the generated body with one value broken is refused.
    assert contract_inputs.invalid(ping, {**sent, "handle": "Not_A_Slug"}) == ["handle: 'Not_A_Slug' is not a slug"]
    assert contract_inputs.invalid(ping, {**sent, "ranges": [sent["ranges"][0]] * 2}) == [
        f"ranges[1]: {sent['ranges'][0]!r} again (its items must be unique)"
    ]


def test_unique_items_the_rules_cannot_give_are_noticed():
    """Planted: 3 unique items of 2 allowed values: no body keeps the rules, so the generator says so."""
    rpcs = _planted(
        lambda f: _ruled(
            f, "PingWebhookEndpointRequest", "colours", repeated=True, unique=True, min_len=3, one_of=["red", "green"]
        )
    )
    assert [p.split(".", 1)[-1] for p in race_hunt.problems(rpcs)] == [
        "PingWebhookEndpoint: colours: no 3 distinct values within its rules"
    ]
