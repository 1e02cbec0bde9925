"""Personas: the generation pipeline, lifecycle, lineage, audit, cards, voice."""

import pathlib
from datetime import datetime

from persona.v1 import personas_pb2_grpc
from sqlalchemy import Engine

from persona_service.kernel.api import (
    ConfigKey,
    EndpointCap,
    Job,
    Module,
    Provider,
    Runtime,
    ServiceBinding,
    Subject,
    Work,
    created_resources,
    in_batches,
    utcnow,
)
from persona_service.personas.directory import PersonaDirectory
from persona_service.personas.repository import PersonaRepository
from persona_service.personas.service import PURGE_BATCH, PersonaService, delete_created_by
from persona_service.personas.servicer import PersonaServicer


def _created_by(work: Work, subject: Subject) -> list[str]:
    """The personas a user created, imported or forked (the audit log names each: a fork by its entry's
    `createdId`, since its resource is the parent)."""
    return list(dict.fromkeys(id_ for action in ("persona.create", "persona.import", "persona.fork")
                              for id_ in created_resources(work, subject, action)))


def _purge(runtime: Runtime) -> int:
    """Soft-deleted personas past their 30-day grace."""
    return sum(purge(runtime.engine, runtime.provider, runtime.clock()))


def purge(engine: Engine, provider: Provider, now: datetime | None = None, batch: int = PURGE_BATCH) -> list[int]:
    """The purge, a batch per transaction (locks and WAL stay bounded, concurrent
    traffic waits for a batch at most); how many each batch purged."""
    due = now or utcnow()
    return in_batches(engine, lambda work: len(PersonaService(work, provider).purge_expired(due, batch)), batch)


MODULE = Module(
    name="personas",
    services=(
        ServiceBinding("persona.v1.PersonaService", PersonaServicer, personas_pb2_grpc.add_PersonaServiceServicer_to_server),
    ),
    id_prefixes={"generation_run": "run"},
    event_types=frozenset({
        "persona.created", "persona.updated", "persona.deleted", "persona.archived", "persona.regenerated",
        "persona.audit_failed", "generation.run.started", "generation.run.completed", "generation.run.failed",
    }),
    config_keys=(
        ConfigKey("engine.pipeline.audit.threshold", "number", 0.6, minimum=0, maximum=1),
        ConfigKey("engine.pipeline.audit.blocking", "boolean", True),
    ),
    # Per-persona config settings address personas of the caller's workspace.
    config_levels={"persona": lambda work, principal, persona_id, early: PersonaDirectory(work).visible(
        principal.workspace_id, persona_id, early=early)},
    endpoint_caps=(
        EndpointCap("personas.create", 60, 3600),
        EndpointCap("personas.refine", 120, 3600),
        EndpointCap("personas.fork", 120, 3600),
        EndpointCap("personas.audit", 300, 3600),
    ),
    jobs=(Job("personas.purge", 600, _purge),),
    migrations=pathlib.Path(__file__).with_name("migrations"),
    # The personas a user created (the audit log names them: creation is audited).
    personal_data=lambda work, subject: work.of(PersonaRepository).personal_data(_created_by(work, subject)),
    erase_personal_data=lambda work, subject, now: {"personas_scheduled": delete_created_by(
        work, _created_by(work, subject), now)},
)
