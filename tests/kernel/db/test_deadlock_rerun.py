"""A deadlock PostgreSQL breaks is never an answer: the unit of work it aborted runs again
(kernel/transport/stages/commit.py), on the stack's PostgreSQL. Two operations take two locks in opposite
orders behind a barrier, the order no declared aggregate allows (kernel/data/aggregates.py): PostgreSQL
aborts one, and both still succeed, as they would one after the other; `persona_db_reruns_total` counts the
rerun (by RPC and SQLSTATE), so a lock-order cycle the answers hide still shows (tests/races.py `reruns`)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from google.protobuf import empty_pb2
from persona.v1 import options_pb2
from persona_service.kernel.data.uow import UnitOfWork
from persona_service.kernel.transport.context import RequestContext, unit_of_work
from persona_service.kernel.transport.policy import MethodMeta
from persona_service.kernel.transport.stages import compose
from persona_service.kernel.transport.stages.call import Call
from persona_service.kernel.transport.stages.commit import Commit
from prometheus_client import REGISTRY
from sqlalchemy import text
from support import engine_for

PATH = "/persona.v1.PersonaService/UpdatePersona"
FIRST, SECOND = 450_001, 450_002  # advisory lock keys no module uses


def _reruns() -> float:
    return REGISTRY.get_sample_value("persona_db_reruns_total", {"rpc": PATH, "sqlstate": "40P01"}) or 0.0


def test_both_sides_of_a_deadlock_succeed_and_each_commits_once(stack):
    reruns_before = _reruns()
    barrier = threading.Barrier(2, timeout=30)
    runs: dict[str, int] = {"a": 0, "b": 0}

    def operation(name: str, first: int, second: int):
        def run(call: Call):
            runs[name] += 1
            conn = unit_of_work(call.ctx).conn
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": first})
            if runs[name] == 1:
                barrier.wait()  # both hold their first lock: each now waits for the other's
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": second})
            conn.execute(text("INSERT INTO deadlock_rerun (side) VALUES (:side)"), {"side": name})
            call.ctx.after_commit.append(lambda: committed.append(name))
            return empty_pb2.Empty()
        return run

    committed: list[str] = []
    with engine_for(stack, pool_size=3) as engine:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE IF NOT EXISTS deadlock_rerun (side text NOT NULL)"))
            conn.execute(text("TRUNCATE deadlock_rerun"))

        def call(name: str, first: int, second: int):
            ctx = RequestContext(request_id=f"req_{name}", method=PATH, uow=UnitOfWork(engine), client_ip=None)
            meta = MethodMeta(PATH, options_pb2.MethodPolicy(), "persona.update", "persona", empty_pb2.Empty)
            chain = compose([Commit(None, None, None)], operation(name, first, second))
            try:
                return chain(Call(ctx, {}, meta, empty_pb2.Empty(), SimpleNamespace(is_active=lambda: True)))
            finally:
                unit_of_work(ctx).close()

        with ThreadPoolExecutor(2) as pool:
            answers = [pool.submit(call, "a", FIRST, SECOND), pool.submit(call, "b", SECOND, FIRST)]
            assert [f.result(timeout=60) for f in answers] == [empty_pb2.Empty(), empty_pb2.Empty()]
        with engine.begin() as conn:
            stored = sorted(conn.execute(text("SELECT side FROM deadlock_rerun")).scalars())
            conn.execute(text("DROP TABLE deadlock_rerun"))
    assert sorted(runs.values()) == [1, 2]  # PostgreSQL aborted one side once; it ran again
    assert _reruns() == reruns_before + 1  # and the rerun was counted
    assert stored == ["a", "b"] and sorted(committed) == ["a", "b"]  # each committed (and its hooks ran) once
