"""Alembic environment: the URL comes from the caller (persona_service.kernel.data.migrate)."""

import persona_service.registry  # noqa: F401 - loads every module's tables into Base.metadata
from alembic import context
from persona_service.kernel.data.base import Base
from persona_service.kernel.data.engine import make_engine

config = context.config


def run_migrations_online() -> None:
    engine = make_engine(config.get_main_option("sqlalchemy.url"), pool_size=1)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=Base.metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported")
run_migrations_online()
