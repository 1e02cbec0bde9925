"""What the request pipeline knows about each RPC, read once from the
descriptors: its `(persona.v1.policy)` option, audit naming and response type."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor, MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from persona.v1 import options_pb2

from persona_service.kernel.principal import ADMIN_SCOPE
from persona_service.kernel.transport.audit import action_name
from persona_service.kernel.transport.validation import check_rules

PACKAGE = "persona.v1."


@dataclass(frozen=True)
class MethodMeta:
    path: str  # "/persona.v1.ApiKeyService/CreateApiKey"
    policy: options_pb2.MethodPolicy
    action: str  # audit action, e.g. "api_key.create"
    resource_type: str
    response_class: type[Message]

    @property
    def raw_stream(self) -> bool:
        """A stream of `google.api.HttpBody`: the servicer frames its own bytes."""
        return self.response_class.DESCRIPTOR.full_name == "google.api.HttpBody"

    @property
    def response_kind(self) -> int:
        return self.policy.response

    @property
    def error_shape(self) -> int:
        return self.policy.error_shape

    @property
    def holds_caller(self) -> bool:
        """A write with a caller starts its unit of work holding the caller's membership (stages.hold), unless it
        orders its own locks against the caller's erasure (`own_member_order`)."""
        return self.policy.write and not self.policy.anonymous and not self.policy.own_member_order

    @property
    def audited(self) -> bool:
        """Writes, admin actions and declared reads are audited whatever their outcome."""
        return self.policy.write or self.policy.platform_admin or self.policy.audited


def method_table(services: list[ServiceDescriptor]) -> dict[str, MethodMeta]:
    """Every method must declare a policy: an RPC without one is a startup
    error, not an open door."""
    table = {}
    named: dict[str, tuple[str, str]] = {}  # request message -> (first RPC, its audit action)
    for service in services:
        for method in service.methods:
            opts = method.GetOptions()
            if not opts.HasExtension(options_pb2.policy):
                raise RuntimeError(f"{method.full_name} declares no (persona.v1.policy)")
            policy = opts.Extensions[options_pb2.policy]
            _check_response_kind(method, policy)
            if policy.anonymous and (policy.scope or policy.roles or policy.platform_admin):
                raise RuntimeError(f"{method.full_name} is anonymous but declares a scope, roles or admin")
            if policy.platform_admin != (policy.scope == ADMIN_SCOPE):
                # A key's scopes confine an administrator too: admin power needs the admin scope.
                raise RuntimeError(f"{method.full_name}: admin-only RPCs, and only they, require scope {ADMIN_SCOPE!r}")
            _check_read_may_lag(method, policy)
            _check_caller_hold(method, policy)
            check_rules(method.input_type)
            path = f"/{service.full_name}/{method.name}"
            table[path] = MethodMeta(
                path=path,
                policy=policy,
                action=policy.audit_action or action_name(method.name, policy.resource_type),
                resource_type=policy.resource_type,
                response_class=message_factory.GetMessageClass(method.output_type),
            )
            _check_one_action_name(named, method, table[path].action)
    return table


def _check_one_action_name(named: dict[str, tuple[str, str]], method: MethodDescriptor, action: str) -> None:
    """RPCs that take one request message are forms of one action (`SendChatMessage`
    and its streaming form): the audit log names it once, whichever form ran."""
    first = named.setdefault(method.input_type.full_name, (method.full_name, action))
    if first[1] != action:
        raise RuntimeError(f"{method.full_name} audits as {action!r} but {first[0]}, which takes the same "
                           f"request, as {first[1]!r}: declare one audit_action for both")


def _check_read_may_lag(method: MethodDescriptor, policy: options_pb2.MethodPolicy) -> None:
    """A replica takes no writes: an RPC that writes (its audit entry, a generation's quota) reads the primary."""
    if policy.read_may_lag and (policy.write or policy.audited or policy.platform_admin or policy.generation):
        raise RuntimeError(f"{method.full_name} may read a lagging replica but writes, is audited or generates")


def _check_caller_hold(method: MethodDescriptor, policy: options_pb2.MethodPolicy) -> None:
    """A write's unit of work begins with its caller's hold (stages.hold), which a unary call and a durable run take:
    a download (a raw-body stream) has neither, so it may not write; `own_member_order` is only a write's."""
    if policy.own_member_order and not policy.write:
        raise RuntimeError(f"{method.full_name} orders its own member locks but is no write")
    if policy.write and method.server_streaming and policy.response == options_pb2.RESPONSE_KIND_RAW_BODY:
        raise RuntimeError(f"{method.full_name} is a download (a raw-body stream) but declares a write")


HTTP_BODY = "google.api.HttpBody"


def _check_response_kind(method: MethodDescriptor, policy: options_pb2.MethodPolicy) -> None:
    """A redirect needs a `uri` to point at; a raw body must be an HttpBody."""
    output = method.output_type
    if policy.response == options_pb2.RESPONSE_KIND_REDIRECT:
        uri = output.fields_by_name.get("uri")
        if uri is None or uri.type != FieldDescriptor.TYPE_STRING or uri.is_repeated:
            raise RuntimeError(f"{method.full_name} answers a redirect but {output.full_name} has no string field `uri`")
    if policy.response == options_pb2.RESPONSE_KIND_RAW_BODY and output.full_name != HTTP_BODY:
        raise RuntimeError(f"{method.full_name} answers a raw body but returns {output.full_name}, not {HTTP_BODY}")


def find_services(names: list[str]) -> list[ServiceDescriptor]:
    pool = descriptor_pool.Default()
    return [pool.FindServiceByName(name) for name in names]


def check_caps(table: dict[str, MethodMeta], caps: Iterable[str]) -> None:
    """Every endpoint cap a policy names must exist: a typo is a startup error."""
    known = set(caps)
    for meta in table.values():
        if meta.policy.endpoint_cap and meta.policy.endpoint_cap not in known:
            raise RuntimeError(f"{meta.path} names unknown endpoint cap {meta.policy.endpoint_cap!r}")
