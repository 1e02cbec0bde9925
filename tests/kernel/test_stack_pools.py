"""Connection budget (mirrors server/persona_service/process/stack.py): every
server process's pools come from one total, after the workers' and the CLI's
share; a budget too small for the process count refuses to start."""

from __future__ import annotations

import pytest
from persona_service.process.stack import CLI_CONNECTIONS, StackError
from persona_service.registry import MODULES
from support import make_stack


def worker_connections() -> int:
    return sum(p.db_connections() * p.count() for p in MODULES.processes)


@pytest.mark.parametrize("servers", [1, 2, 8])
def test_every_pool_fits_the_budget(tmp_path, servers):
    stack = make_stack(tmp_path, servers=servers, settings={"db_connections": 120}, PERSONA_GRPC_WORKERS="4")
    pools = stack.server_pools()
    unary, streams = int(pools["PERSONA_DB_POOL_SIZE"]), int(pools["PERSONA_STREAM_DB_POOL_SIZE"])
    assert unary == 4 + 2  # every unary thread, plus room for a call's second connection
    assert streams >= 1
    assert servers * (unary + streams) + worker_connections() + CLI_CONNECTIONS <= 120


def test_a_budget_too_small_refuses_to_start(tmp_path):
    stack = make_stack(tmp_path, servers=12, settings={"db_connections": 60}, PERSONA_GRPC_WORKERS="4")
    with pytest.raises(StackError, match="PERSONA_DB_CONNECTIONS=60"):
        stack.start()


def test_pools_set_explicitly_win(tmp_path):
    stack = make_stack(tmp_path, PERSONA_DB_POOL_SIZE="3")
    assert stack.server_pools() == {}


def test_stream_servers_take_the_stream_connections_and_unary_servers_the_unary_ones(tmp_path):
    stack = make_stack(tmp_path, servers=2, stream_servers=1, settings={"db_connections": 60},
                       PERSONA_GRPC_WORKERS="4")
    unary, streams = stack.server_pools(), stack.server_pools(stream_server=True)
    assert unary == {"PERSONA_DB_POOL_SIZE": "6", "PERSONA_STREAM_DB_POOL_SIZE": "2"}
    assert int(streams["PERSONA_DB_POOL_SIZE"]) == 2 and int(streams["PERSONA_STREAM_DB_POOL_SIZE"]) >= 1
    servers = sum(int(n) for n in [*unary.values(), *unary.values(), *streams.values()])
    runner = sum(int(n) for n in stack.runner_pools().values()) + 1  # + its LISTEN
    assert servers + runner + worker_connections() + CLI_CONNECTIONS <= 60
