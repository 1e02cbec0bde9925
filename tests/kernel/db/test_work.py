"""The unit of work as a service holds it (kernel/data/work.py): repositories bound to it, built once and on the
call's connection, opened only when first asked for; nothing else is bound, so no service holds a connection."""

from __future__ import annotations

import pytest
import sqlalchemy
from persona_service.chat.repository import ChatSessionRepository
from persona_service.config.repository import ConfigRepository
from persona_service.config.service import ConfigService
from persona_service.kernel.data.tasks_repository import TaskRepository
from persona_service.kernel.data.uow import UnitOfWork
from persona_service.kernel.data.work import NotARepository, Work, connection_of
from persona_service.kernel.principal import Principal
from sqlalchemy import text


def test_a_repository_is_bound_once_to_the_unit_of_works_connection_opened_on_first_use(engine):
    uow = UnitOfWork(engine)
    try:
        assert uow._conn is None  # built, nothing opened: a call that reads nothing takes no connection
        repository = uow.work.of(ConfigRepository)
        assert uow._conn is not None and repository._conn is uow.conn
        assert uow.work.of(ConfigRepository) is repository  # one per unit of work: a service and its callee share it
        assert connection_of(uow.work)() is uow.conn
    finally:
        uow.close()


def test_services_over_one_work_share_its_repositories(engine):
    with engine.connect() as conn:
        work = Work.on(conn)
        assert ConfigService(work)._repo is ConfigService(work)._repo is work.of(ConfigRepository)


@pytest.mark.parametrize("thing", [
    ConfigService,  # a service takes the Work itself
    lambda conn: conn,  # a function handed the connection would hand it on
    sqlalchemy.Connection,
    TaskRepository,  # the kernel's own repositories sit behind its API (enqueue, Outbox)
    Principal,
], ids=["service", "lambda", "sqlalchemy-connection", "kernel-repository", "record"])
def test_only_a_domains_repository_is_bound(engine, thing):
    with engine.connect() as conn:
        with pytest.raises(NotARepository):
            Work.on(conn).of(thing)


def _forged_by_its_module() -> type:
    return type("ConfigRepository", (), {"__module__": "persona_service.config.repository",
                                         "__init__": lambda self, conn: None})


def _forged_by_a_file_claiming_the_name() -> type:
    namespace: dict[str, object] = {"__name__": "persona_service.chat.repository"}
    exec("class ChatSessionRepositoryForged:\n    def __init__(self, conn):\n        self.conn = conn\n", namespace)
    return namespace["ChatSessionRepositoryForged"]


@pytest.mark.parametrize("forge", [_forged_by_its_module, _forged_by_a_file_claiming_the_name])
def test_a_class_claiming_a_repositorys_module_is_not_bound(engine, forge):
    """`__module__` is writable: a class made elsewhere that names a repository's module (or is defined under a
    rebound `__name__`) is not the class that module defines, so it is not handed the connection."""
    with engine.connect() as conn:
        with pytest.raises(NotARepository):
            Work.on(conn).of(forge())


def test_a_savepoint_rolls_its_block_back_and_the_unit_of_work_goes_on(engine):
    with engine.connect() as conn:
        conn.execute(text("CREATE TEMP TABLE work_savepoint (i int)"))
        work = Work.on(conn)
        with pytest.raises(RuntimeError), work.savepoint():
            conn.execute(text("INSERT INTO work_savepoint VALUES (1)"))
            raise RuntimeError("the block fails")
        conn.execute(text("INSERT INTO work_savepoint VALUES (2)"))
        assert conn.execute(text("SELECT array_agg(i) FROM work_savepoint")).scalar_one() == [2]
        conn.rollback()


def test_a_remembered_read_is_handed_the_work_and_opens_its_connection_to_read(engine):
    """`ChatSessionRepository.remembered` is handed the Work, not a connection, so that a hit in memory opens none
    (tests/kernel/test_read_cache.py); a miss reads on the unit of work's own connection."""
    uow = UnitOfWork(engine, read_only=True)
    try:
        assert ChatSessionRepository.remembered("ws_none", "chat_session_none", uow.work) is None  # a miss reads
        assert uow._conn is not None
    finally:
        uow.close()
