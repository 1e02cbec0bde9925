"""RPC policies, read from the `(persona.v1.policy)` method option."""

from __future__ import annotations

from google.protobuf import descriptor_pool
from google.protobuf.descriptor import ServiceDescriptor

from persona.v1 import options_pb2

PACKAGE = "persona.v1."


def method_policies(services: list[ServiceDescriptor]) -> dict[str, options_pb2.MethodPolicy]:
    """Policies by gRPC method path (`/persona.v1.X/Y`). Every method must
    declare one: an RPC without a policy is a startup error, not an open door."""
    policies = {}
    for service in services:
        for method in service.methods:
            opts = method.GetOptions()
            if not opts.HasExtension(options_pb2.policy):
                raise RuntimeError(f"{method.full_name} declares no (persona.v1.policy)")
            policies[f"/{service.full_name}/{method.name}"] = opts.Extensions[options_pb2.policy]
    return policies


def all_services() -> list[ServiceDescriptor]:
    pool = descriptor_pool.Default()
    from persona_service.transport import servicers  # noqa: F401  (registers the generated modules)

    return [pool.FindServiceByName(name) for name in servicers.SERVICE_NAMES]
