"""The kernel's one door: every name a domain (or a domain's `api.py`) may take from the kernel.

Domains import `persona_service.kernel.api` and no other kernel module (`.importlinter`'s `kernel-door`
contract); what is not named here (runs, the task runner, the fair scheduler, the pipeline and its stages,
the App, process supervision, the edge, the migrations' machinery) is the kernel's own. A new name goes in
the block below, in its group; that block is the list: `__all__` repeats it (tests/test_architecture.py
checks they agree), and at run time `__getattr__` loads a name's module on its first use, so that a
command's file or a `tables.py` pays only for what it uses (`persona-service mint-jwt`, kernel/command.py)
and importing the door imports no kernel module that may import the providers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # --- errors: raised by services, rendered by the pipeline's outcome stage
    from persona_service.kernel.clock import iso as iso
    from persona_service.kernel.clock import utcnow as utcnow
    from persona_service.kernel.config_keys import CONFIG_KEYS as CONFIG_KEYS
    from persona_service.kernel.config_keys import LEVEL_CHECKS as LEVEL_CHECKS
    from persona_service.kernel.config_keys import ConfigKey as ConfigKey

    # --- the unit of work: aggregates (lock the root first), writes decided once, batches
    from persona_service.kernel.data.aggregates import DECIDES_NOTHING as DECIDES_NOTHING
    from persona_service.kernel.data.aggregates import Aggregate as Aggregate
    from persona_service.kernel.data.aggregates import declare as declare_aggregate
    from persona_service.kernel.data.aggregates import lock_root as lock_root
    from persona_service.kernel.data.audit_repository import AuditRecord as AuditRecord

    # tables: a domain's `tables.py` and repositories only (the AST rule `tables_outside_their_domain`
    # reads these names as tables); OutboxEvent is the outbox's table, which the webhook fan-out reads
    from persona_service.kernel.data.base import Base as Base
    from persona_service.kernel.data.base import created_at_column as created_at_column
    from persona_service.kernel.data.base import table_of as table_of
    from persona_service.kernel.data.base import trigram_index as trigram_index

    # --- composition code inside domains (a command, the webhook worker's process, readiness)
    from persona_service.kernel.data.engine import make_engine as make_engine
    from persona_service.kernel.data.migrate import alembic_config as alembic_config
    from persona_service.kernel.data.migrate import upgrade as upgrade_database
    from persona_service.kernel.data.notifications_repository import listening as listening
    from persona_service.kernel.data.outages import connection_lost as connection_lost
    from persona_service.kernel.data.outbox_repository import EventRecord as EventRecord

    # personal data: a module's part of a subject's export and erasure (privacy)
    from persona_service.kernel.data.personal_data import Batches as Batches
    from persona_service.kernel.data.personal_data import Subject as Subject
    from persona_service.kernel.data.personal_data import audit_events as audit_events
    from persona_service.kernel.data.personal_data import created_resources as created_resources
    from persona_service.kernel.data.personal_data import export_batches as export_batches
    from persona_service.kernel.data.prepared import Prepared as Prepared

    # rows as typed records (repositories)
    from persona_service.kernel.data.records import record as record
    from persona_service.kernel.data.records import record_or_none as record_or_none
    from persona_service.kernel.data.records import records as records
    from persona_service.kernel.data.tables import OutboxEvent as OutboxEvent
    from persona_service.kernel.data.unique import derive_unique as derive_unique
    from persona_service.kernel.data.unique import once_per as once_per
    from persona_service.kernel.data.uow import in_batches as in_batches
    from persona_service.kernel.errors import ApiError as ApiError
    from persona_service.kernel.errors import BadRequest as BadRequest
    from persona_service.kernel.errors import Forbidden as Forbidden
    from persona_service.kernel.errors import NotFound as NotFound
    from persona_service.kernel.errors import ServiceUnavailable as ServiceUnavailable
    from persona_service.kernel.errors import StateConflict as StateConflict
    from persona_service.kernel.errors import Unauthorized as Unauthorized
    from persona_service.kernel.errors import ValidationFailed as ValidationFailed
    from persona_service.kernel.errors import Violation as Violation

    # --- ids, clock
    from persona_service.kernel.ids import has_prefix as has_prefix
    from persona_service.kernel.ids import is_uuid as is_uuid
    from persona_service.kernel.ids import new_id as new_id
    from persona_service.kernel.ids import new_ids as new_ids
    from persona_service.kernel.logs import configure as configure_logs

    # --- observability: a module's own spans and metrics, the exposition /metrics answers
    from persona_service.kernel.metrics import GENERATION_RUNS as GENERATION_RUNS
    from persona_service.kernel.metrics import GENERATION_STEPS as GENERATION_STEPS
    from persona_service.kernel.metrics import exposition as metrics_exposition

    # generators a servicer drains (a unary answer) or follows (a stream's progress)
    from persona_service.kernel.operations import Progress as Progress
    from persona_service.kernel.operations import drain as drain

    # --- who calls: the principal, scopes and plans
    from persona_service.kernel.principal import KEY_SCOPES as KEY_SCOPES
    from persona_service.kernel.principal import PLANS as PLANS
    from persona_service.kernel.principal import SCOPES as SCOPES
    from persona_service.kernel.principal import Principal as Principal
    from persona_service.kernel.principal import Scope as Scope
    from persona_service.kernel.process.edge import ROOT as ROOT
    from persona_service.kernel.process.embedded import database_url as database_url
    from persona_service.kernel.process.embedded import postgres_url as postgres_url

    # --- a module's declaration (module.py): the Module and what it declares
    from persona_service.kernel.process.module import Command as Command
    from persona_service.kernel.process.module import Job as Job
    from persona_service.kernel.process.module import Module as Module
    from persona_service.kernel.process.module import Modules as Modules
    from persona_service.kernel.process.module import Process as Process
    from persona_service.kernel.process.module import ServiceBinding as ServiceBinding
    from persona_service.kernel.process.resources import HasResources as HasResources
    from persona_service.kernel.process.resources import Resource as Resource
    from persona_service.kernel.process.resources import Runtime as Runtime
    from persona_service.kernel.process.resources import ServicerDeps as ServicerDeps
    from persona_service.kernel.secretbox import SecretBox as SecretBox

    # --- settings: a module's section and how it is read
    from persona_service.kernel.settings import Section as Section
    from persona_service.kernel.settings import Settings as Settings
    from persona_service.kernel.settings import load as load
    from persona_service.kernel.tracing import configure as configure_tracing
    from persona_service.kernel.tracing import shutdown as shutdown_tracing
    from persona_service.kernel.tracing import span as span
    from persona_service.kernel.transport.audit import AuditEntry as AuditEntry
    from persona_service.kernel.transport.audit import AuditLog as AuditLog
    from persona_service.kernel.transport.auth import Authenticator as Authenticator
    from persona_service.kernel.transport.auth import CredentialCache as CredentialCache

    # the credential store's records, which `orgs` implements (`Module.credentials`)
    from persona_service.kernel.transport.auth import KeyCredential as KeyCredential
    from persona_service.kernel.transport.auth import MemberCredential as MemberCredential
    from persona_service.kernel.transport.auth import hash_secret as hash_secret

    # --- the call: its request context (servicers), what the App hands servicers, jobs and tasks
    from persona_service.kernel.transport.context import RequestContext as RequestContext
    from persona_service.kernel.transport.context import context_of as context_of

    # --- proto <-> domain conversions (servicers)
    from persona_service.kernel.transport.convert import int32 as int32
    from persona_service.kernel.transport.convert import message_json as message_json
    from persona_service.kernel.transport.convert import nullable_time as nullable_time
    from persona_service.kernel.transport.convert import optional_time as optional_time
    from persona_service.kernel.transport.convert import page_limit as page_limit
    from persona_service.kernel.transport.convert import struct as struct
    from persona_service.kernel.transport.convert import text_metadata as text_metadata
    from persona_service.kernel.transport.convert import timestamp as timestamp

    # --- pages
    from persona_service.kernel.transport.cursors import CursorCodec as CursorCodec
    from persona_service.kernel.transport.cursors import cursor_page as cursor_page
    from persona_service.kernel.transport.cursors import keyset_page as keyset_page

    # error shapes of a module's own (SCIM's, OpenAI's, portraits' edits: `Module.error_shapes`)
    from persona_service.kernel.transport.errors import compact_json as compact_json
    from persona_service.kernel.transport.errors import envelope as envelope
    from persona_service.kernel.transport.errors import error_message as error_message
    from persona_service.kernel.transport.hints import Hints as Hints

    # limits: endpoint caps and plan limits a module declares, quotas it charges
    from persona_service.kernel.transport.limits.plans import PLAN_LIMITS as PLAN_LIMITS
    from persona_service.kernel.transport.limits.plans import EndpointCap as EndpointCap
    from persona_service.kernel.transport.limits.plans import Limits as Limits
    from persona_service.kernel.transport.limits.plans import PlanLimit as PlanLimit
    from persona_service.kernel.transport.limits.plans import Quota as Quota
    from persona_service.kernel.transport.limits.plans import override_maximum as override_maximum

    # --- what a change records: events (the outbox), the audit log, and their read records
    from persona_service.kernel.transport.outbox import EVENT_TYPES as EVENT_TYPES
    from persona_service.kernel.transport.outbox import Outbox as Outbox

    # the durable run a streamed call executes in: its checkpoints and replayed frames, not the runs
    # themselves (kernel.transport.runs: the store, the owners, the lease)
    from persona_service.kernel.transport.runs import RunLost as RunLost
    from persona_service.kernel.transport.runs import checkpoint as checkpoint
    from persona_service.kernel.transport.runs import current_id as current_run_id
    from persona_service.kernel.transport.runs import earlier_frames as earlier_frames

    # metadata the edge sets on a call (kernel.transport.stages.call): it came through Envoy; it is a HEAD
    from persona_service.kernel.transport.stages.call import EDGE_MARK as EDGE_MARK
    from persona_service.kernel.transport.stages.call import HEAD_MARK as HEAD_MARK

    # durable tasks: a kind, its record, enqueued in the change's unit of work (not the runner)
    from persona_service.kernel.transport.tasks import TaskKind as TaskKind
    from persona_service.kernel.transport.tasks import TaskRecord as TaskRecord
    from persona_service.kernel.transport.tasks import enqueue as enqueue

__all__ = [
    # errors
    "ApiError", "BadRequest", "Forbidden", "NotFound", "ServiceUnavailable", "StateConflict", "Unauthorized",
    "ValidationFailed", "Violation", "compact_json", "envelope", "error_message",
    # ids, clock
    "has_prefix", "is_uuid", "new_id", "new_ids", "iso", "utcnow",
    # who calls
    "KEY_SCOPES", "PLANS", "SCOPES", "Principal", "Scope", "KeyCredential", "MemberCredential", "hash_secret",
    # the call
    "RequestContext", "context_of", "HasResources", "Resource", "Runtime", "ServicerDeps", "Hints", "SecretBox",
    "RunLost", "checkpoint", "current_run_id", "earlier_frames", "Progress", "drain",
    # conversions
    "int32", "message_json", "nullable_time", "optional_time", "page_limit", "struct", "text_metadata", "timestamp",
    "EDGE_MARK", "HEAD_MARK",
    # pages
    "CursorCodec", "cursor_page", "keyset_page",
    # the unit of work
    "DECIDES_NOTHING", "Aggregate", "declare_aggregate", "lock_root", "Prepared", "derive_unique", "once_per", "in_batches",
    "record", "record_or_none", "records",
    "Base", "created_at_column", "table_of", "trigram_index", "OutboxEvent",
    # what a change records
    "EVENT_TYPES", "Outbox", "AuditEntry", "AuditLog", "AuditRecord", "EventRecord",
    "Batches", "Subject", "audit_events", "created_resources", "export_batches",
    # a module's declaration
    "Command", "Job", "Module", "Modules", "Process", "ServiceBinding", "CONFIG_KEYS", "LEVEL_CHECKS", "ConfigKey",
    "TaskKind", "TaskRecord", "enqueue",
    "PLAN_LIMITS", "EndpointCap", "Limits", "PlanLimit", "Quota", "override_maximum",
    # settings
    "Section", "Settings", "load",
    # observability
    "GENERATION_RUNS", "GENERATION_STEPS", "metrics_exposition", "span",
    # composition code inside domains
    "make_engine", "alembic_config", "upgrade_database", "listening", "connection_lost", "configure_logs", "ROOT",
    "database_url", "postgres_url", "configure_tracing", "shutdown_tracing", "Authenticator", "CredentialCache",
]


def homes() -> dict[str, tuple[str, str]]:
    """Each name of the door -> (its module, its name there), as the TYPE_CHECKING block above imports it."""
    import ast
    import pathlib

    tree = ast.parse(pathlib.Path(__file__).read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    return {alias.asname or alias.name: (node.module or "", alias.name)
            for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}


if not TYPE_CHECKING:  # to mypy every name is the import above; a name not there is an error, not Any
    _HOMES: dict[str, tuple[str, str]] = {}

    def __getattr__(name: str) -> object:
        """Load a door's name from its module on first use (PEP 562), then keep it here."""
        if not _HOMES:
            _HOMES.update(homes())
        if name not in _HOMES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}: the kernel's door does not name it")
        import importlib

        module, original = _HOMES[name]
        value = globals()[name] = getattr(importlib.import_module(module), original)
        return value
