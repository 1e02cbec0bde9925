"""Moderation: review items for every non-pass verdict, `moderation.flagged`,
and the platform administrators' queue."""

import pathlib

from persona.v1 import moderation_pb2_grpc

from persona_service.kernel.api import Module, Need, ServiceBinding
from persona_service.moderation.servicer import ModerationServicer

MODULE = Module(
    name="moderation",
    migrations=pathlib.Path(__file__).with_name("migrations"),
    services=(ServiceBinding("persona.v1.ModerationService", ModerationServicer,
                             moderation_pb2_grpc.add_ModerationServiceServicer_to_server),),
    id_prefixes={"moderation_review": "mod"},
    event_types=frozenset({"moderation.flagged"}),
    needs=frozenset({Need.REVIEW_RESOLVERS}),  # resolving a review acts on the subject's module
)
