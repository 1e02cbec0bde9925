"""Portraits: generated and edited images of personas, drawn by durable tasks."""

from persona.v1 import options_pb2, portraits_pb2_grpc
from sqlalchemy import Engine

from persona_service.files.api import Storage, object_key, storage_for
from persona_service.kernel.api import EndpointCap, Job, Module, PlanLimit, ServiceBinding, TaskKind, Work, compact_json
from persona_service.portraits import render
from persona_service.portraits.service import RENDER_TASK, PortraitService
from persona_service.portraits.servicer import PortraitServicer
from persona_service.portraits.settings import PortraitSettings

# The statuses the spec gives the portrait shape (the edit's 404, 422 and 502); its other answers (401, 403,
# 409, 429, 504, the edge's 400, 405, 413, 415...) are the envelope, as every other route's.
PORTRAIT_STATUSES = frozenset({404, 422, 502})


def portrait_error_body(error: dict[str, object], status: int) -> tuple[str, None]:
    """The portrait error shape (options.ERROR_SHAPE_PORTRAIT): `error` is
    the code, beside `message` and the details, flat; the envelope for the
    statuses the spec does not give it."""
    if status not in PORTRAIT_STATUSES:
        return compact_json({"error": error}), None
    found = error["details"]  # the envelope's: always an object
    details = {k: v for k, v in (found.items() if isinstance(found, dict) else ()) if k not in ("error", "message")}
    return compact_json({"error": error["code"], "message": error["message"], **details}), None


def purge_portraits(engine: Engine, storage: Storage) -> int:
    """Portraits (rows and images) of personas purged after their grace period.
    A failure to delete images rolls the rows back, so the next round retries."""
    with engine.connect() as conn:
        personas = PortraitService(Work.on(conn)).orphaned_personas()
    if not personas:
        return 0
    with engine.begin() as conn:  # the rows go only once their images are gone
        rows = PortraitService(Work.on(conn)).forget_personas(personas)
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
    # Images (generations and edits) per billing period (ours; the spec names none).
    plan_limits=(PlanLimit("images_per_month", {"free": 20, "pro": 200, "team": 1_000, "enterprise": 10_000}),),
    tasks=(TaskKind(RENDER_TASK, render.render, render.give_up, max_attempts=3, lease_seconds=900),),
    jobs=(Job("portraits.purge", 600, lambda runtime: purge_portraits(runtime.engine, storage_for(runtime))),),
    settings=PortraitSettings,
    resources=(render.IMAGES,),
    error_shapes={options_pb2.ERROR_SHAPE_PORTRAIT: portrait_error_body},
)
