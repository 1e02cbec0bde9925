"""Portraits: generated and edited images of personas, drawn by durable tasks."""

from persona.v1 import portraits_pb2_grpc

from persona_service.files.storage import Storage, object_key, storage_for
from persona_service.kernel.limits.plans import EndpointCap
from persona_service.kernel.module import Job, Module, ServiceBinding
from persona_service.kernel.tasks import TaskKind
from persona_service.portraits import render
from persona_service.portraits.service import RENDER_TASK, PortraitService
from persona_service.portraits.servicer import PortraitServicer
from persona_service.portraits.settings import PortraitSettings


def purge_portraits(engine, storage: Storage) -> int:
    """Portraits (rows and images) of personas purged after their grace period.
    A failure to delete images rolls the rows back, so the next round retries."""
    with engine.connect() as conn:
        personas = PortraitService(conn).orphaned_personas()
    if not personas:
        return 0
    with engine.begin() as conn:  # the rows go only once their images are gone
        rows = PortraitService(conn).forget_personas(personas)
        for org_id, persona_id in {(r.org_id, r.persona_id) for r in rows}:
            storage.delete_prefix(object_key(org_id, "portraits", persona_id))
    return len(rows)


MODULE = Module(
    name="portraits",
    services=(
        ServiceBinding("persona.v1.PortraitService", PortraitServicer,
                       portraits_pb2_grpc.add_PortraitServiceServicer_to_server),
    ),
    endpoint_caps=(EndpointCap("portraits.create", 120, 3600), EndpointCap("portraits.edit", 600, 3600)),
    tasks=(TaskKind(RENDER_TASK, render.render, render.give_up, max_attempts=3, lease_seconds=900),),
    jobs=(Job("portraits.purge", 600, lambda app: purge_portraits(app.engine, storage_for(app))),),
    settings=PortraitSettings,
)
