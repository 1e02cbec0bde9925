"""What a module's own entry points open, offered through the kernel's door (kernel.api): a command
(`Module.commands`) and a process of its own (`Module.processes`) reach the database,
logs, tracing, migrations and session tokens through these few functions, not through the engine,
the embedded PostgreSQL, Alembic or the authenticator themselves."""

from __future__ import annotations

import pathlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from persona_service.kernel.settings import Settings


@contextmanager
def command_database(migrations: Iterable[pathlib.Path] | None = None) -> Iterator[Engine]:
    """The database a command acts on (DATABASE_URL, else the embedded PostgreSQL), first migrated to the
    head of `migrations` when given: an engine of one connection, disposed after."""
    from persona_service.kernel.data import migrate
    from persona_service.kernel.data.embedded import database_url
    from persona_service.kernel.data.engine import make_engine
    from persona_service.kernel.settings import load

    url = database_url(load())
    if migrations is not None:
        migrate.upgrade(url, migrations)
    engine = make_engine(url, pool_size=1)
    try:
        yield engine
    finally:
        engine.dispose()


@contextmanager
def module_process(service: str, pool_size: int) -> Iterator[tuple[Settings, Engine]]:
    """A module's own process (`Module.processes`), as the kernel's are set up: the settings, logs as
    configured, an engine of `pool_size` on the database (DATABASE_URL, else the embedded PostgreSQL) and
    spans exported as `service`; the engine disposed and the spans flushed when it ends."""
    from persona_service.kernel import logs, tracing
    from persona_service.kernel.data.boundaries import BoundaryGuard
    from persona_service.kernel.data.embedded import database_url
    from persona_service.kernel.data.engine import make_engine
    from persona_service.kernel.settings import load

    settings = load()
    logs.configure(settings.log_level, settings.log_format)
    engine = make_engine(database_url(settings), pool_size=pool_size)
    if settings.boundary_guard:
        BoundaryGuard().install(engine)
    tracing.configure(service, settings.otlp_endpoint, [engine])
    try:
        yield settings, engine
    finally:
        engine.dispose()
        tracing.shutdown()


def session_token(user_id: str, org_id: str, workspace_id: str, ttl_seconds: int | None = None) -> str:
    """A session JWT for this member, signed as the service signs them (PERSONA_JWT_SECRET)."""
    from persona_service.kernel.settings import load
    from persona_service.kernel.transport.auth import Authenticator, CredentialCache

    settings = load()
    authenticator = Authenticator(settings.resolved_jwt_secret(), CredentialCache(0), settings.jwt_ttl_seconds)
    return authenticator.mint_session(user_id, org_id, workspace_id, ttl_seconds)

