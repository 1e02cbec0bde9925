"""Typed configuration per organization, workspace and persona; the
Enterprise rate-limit overrides the kernel's limits read."""

from persona.v1 import config_pb2_grpc

from persona_service.config.service import RATE_LIMIT_KEYS, ConfigService
from persona_service.config.servicer import ConfigServicer
from persona_service.kernel.api import Module, ServiceBinding

MODULE = Module(
    name="config",
    services=(
        ServiceBinding("persona.v1.ConfigService", ConfigServicer, config_pb2_grpc.add_ConfigServiceServicer_to_server),
    ),
    config_keys=RATE_LIMIT_KEYS,
    limit_overrides=lambda work, org_id: ConfigService(work).rate_limit_overrides(org_id),
)
