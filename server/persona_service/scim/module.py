"""SCIM 2.0 provisioning for identity providers (see proto/persona/v1/scim.proto)."""

import pathlib

from persona.v1 import options_pb2, scim_pb2_grpc

from persona_service.kernel.api import Module, ServiceBinding
from persona_service.scim.errors import scim_error_body
from persona_service.scim.service import erase_personal_data, lock_personal_data
from persona_service.scim.servicer import BASE_PATH, ScimServicer, ScimTokenServicer

MODULE = Module(
    name="scim",
    services=(
        ServiceBinding("persona.v1.ScimService", ScimServicer, scim_pb2_grpc.add_ScimServiceServicer_to_server),
        ServiceBinding("persona.v1.ScimTokenService", ScimTokenServicer,
                       scim_pb2_grpc.add_ScimTokenServiceServicer_to_server),
    ),
    id_prefixes={"scim_group": "grp"},
    lenient_query_prefixes=(BASE_PATH + "/",),
    error_shape_prefixes={BASE_PATH + "/": options_pb2.ERROR_SHAPE_SCIM},
    error_shapes={options_pb2.ERROR_SHAPE_SCIM: scim_error_body},
    erase_personal_data=lambda work, subject, now: erase_personal_data(work, subject.org_id, subject.user_id),
    lock_personal_data=lambda work, subject: lock_personal_data(work, subject.org_id, subject.user_id),
    migrations=pathlib.Path(__file__).with_name("migrations"),
)
