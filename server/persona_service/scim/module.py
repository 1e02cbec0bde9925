"""SCIM 2.0 provisioning for identity providers (see proto/persona/v1/scim.proto).

The servicers and the service load when first used, not with the module: they
build scim2-models' pydantic models (over a second of CPU), which a runner or
a webhook worker never needs (docs/testing.md)."""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING

from persona.v1 import options_pb2, scim_pb2_grpc

from persona_service.kernel.process.module import Module, ServiceBinding
from persona_service.scim.errors import BASE_PATH, scim_error_body

if TYPE_CHECKING:
    from datetime import datetime

    from sqlalchemy import Connection

    from persona_service.kernel.ports import Subject
    from persona_service.kernel.process.resources import ServicerDeps


def _scim_servicer(deps: ServicerDeps) -> object:
    from persona_service.scim.servicer import ScimServicer

    return ScimServicer(deps)


def _token_servicer(deps: ServicerDeps) -> object:
    from persona_service.scim.servicer import ScimTokenServicer

    return ScimTokenServicer(deps)


def _erase(conn: Connection, subject: Subject, now: datetime) -> dict[str, int]:
    from persona_service.scim.service import erase_personal_data

    return erase_personal_data(conn, subject.org_id, subject.user_id)


MODULE = Module(
    name="scim",
    services=(
        ServiceBinding("persona.v1.ScimService", _scim_servicer, scim_pb2_grpc.add_ScimServiceServicer_to_server),
        ServiceBinding("persona.v1.ScimTokenService", _token_servicer,
                       scim_pb2_grpc.add_ScimTokenServiceServicer_to_server),
    ),
    id_prefixes={"scim_group": "grp"},
    lenient_query_prefixes=(BASE_PATH + "/",),
    error_shape_prefixes={BASE_PATH + "/": options_pb2.ERROR_SHAPE_SCIM},
    error_shapes={options_pb2.ERROR_SHAPE_SCIM: scim_error_body},
    erase_personal_data=_erase,
    migrations=pathlib.Path(__file__).with_name("migrations"),
)
