"""The boundary guard (kernel/data/boundaries.py) on violations planted here: modules written into a
`persona_service/<domain>/` folder of this test's own, loaded into the real package's namespace
(`persona_service.chat.planted_repository`…) and called on the stack's PostgreSQL and Redis with the guard
on. The plants are spelt in ways the guard's code does not name (Core, `text()`, a subquery string,
`sqlalchemy.table()`, the metadata, a CTE, the driver's own cursor, a `Prepared` read; sockets, urllib,
httpx; redis-py's client, pipelines, pub/sub): it reads what runs, so each must be refused by kind. The
controls beside them (a domain's own and the kernel's tables, a read port, the unit of work's commit, a job's
transaction, a client file's connection, a kernel capability's Redis) must pass. The rest of the suite runs
on stacks with the guard on (tests/support.py: PERSONA_BOUNDARY_GUARD=1): that is the proof that what the
service really does passes."""

from __future__ import annotations

import importlib.util
import socket
import sys
import textwrap
import threading

import pytest
import redis
from persona_service.kernel.data import boundaries
from persona_service.kernel.data.boundaries import BoundaryViolation
from persona_service.kernel.data.uow import UnitOfWork
from persona_service.kernel.transport.hints import Hints
from support import engine_for

PLANTED_REPOSITORY = '''
import socket
import urllib.request

import httpx
import sqlalchemy as sa
from sqlalchemy import text


def subquery_string(conn):
    return conn.execute(text("SELECT count(*) FROM chat_sessions WHERE persona_id IN (select id from personas)")).all()


def lightweight_table(conn):
    return conn.execute(sa.select(sa.table("memberships", sa.column("user_id")).c.user_id).limit(1)).all()


def schema_qualified(conn):
    return conn.exec_driver_sql("SELECT 1 FROM public.personas LIMIT 1").all()


def quoted(conn):
    return conn.exec_driver_sql('SELECT 1 FROM "public"."invoices" LIMIT 1').all()


def from_the_metadata(conn):
    from persona_service.kernel.data.base import Base

    return conn.execute(sa.select(sa.func.count()).select_from(Base.metadata.tables["subscriptions"])).all()


def in_a_cte(conn):
    return conn.execute(text("WITH o AS (SELECT id FROM organizations) SELECT count(*) FROM o")).all()


def on_the_driver_cursor(conn):
    return conn.connection.driver_connection.execute("select count(*) from users").fetchall()


def as_a_prepared_read(conn):
    from dataclasses import dataclass

    from persona_service.kernel.data.prepared import Prepared

    @dataclass
    class Row:
        id: str

    return Prepared(sa.select(sa.table("workspaces", sa.column("id")).c.id).limit(1), Row).first(conn, {})


def own_and_kernel_tables(conn):
    return conn.execute(text("SELECT count(*) FROM chat_sessions s JOIN events e ON false")).all()


def through_a_read_port(conn):
    from persona_service.personas.api import PersonaDirectory

    return PersonaDirectory(conn).existing(["persona_planted"])


def handed_to_the_export_port(conn):
    from persona_service.kernel.data.personal_data import export_batches

    return export_batches(conn, text("SELECT id FROM personas"))


def its_own_rows_for_export(conn):
    from persona_service.kernel.data.personal_data import export_batches

    return export_batches(conn, text("SELECT id FROM chat_sessions LIMIT 1"))


def commits_its_connection(conn):
    conn.commit()


def commits_in_sql(conn):
    conn.exec_driver_sql("COMMIT")


def commits_the_driver(conn):
    conn.connection.driver_connection.commit()


def opens_a_transaction_of_its_own(conn):
    with conn.engine.begin() as own:
        own.execute(text("SELECT 1"))


def connects(address):
    socket.create_connection(address, timeout=5).close()


def resolves(address):
    socket.getaddrinfo("localhost", address[1])


def fetches(address):
    urllib.request.urlopen(f"http://{address[0]}:{address[1]}/", timeout=5)


def with_httpx(address):
    with httpx.Client(timeout=5) as client:
        client.get(f"http://{address[0]}:{address[1]}/")
'''

PLANTED_SERVICE = '''
import http.client


def asks_over_http(address):
    connection = http.client.HTTPConnection(*address, timeout=5)
    connection.request("GET", "/")


def through_a_kernel_capability(hints):
    return hints.get("planted")
'''

PLANTED_SERVICER = '''
import redis


def reads_redis(url):
    return redis.Redis.from_url(url).get("planted")


def pipelines(url):
    return redis.Redis.from_url(url).pipeline().incr("planted").expire("planted", 5).execute()


def publishes(url):
    return redis.Redis.from_url(url).publish("planted", "x")


def subscribes(url):
    pubsub = redis.Redis.from_url(url).pubsub()
    pubsub.subscribe("planted")
    pubsub.close()


def reads_a_capabilitys_client(hints):
    return hints._client.get("ratelimit:planted")


def commits_the_unit_of_works_transaction(conn):
    conn.commit()


def commits_a_connection_of_its_own(engine):
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
        conn.commit()
'''

PLANTED_SUPPORT = '''
import socket


def connects(address):
    socket.create_connection(address, timeout=5).close()
'''

PLANTED_JOBS = '''
from sqlalchemy import text


def in_a_transaction_of_its_own(engine):
    with engine.begin() as conn:
        return conn.execute(text("SELECT count(*) FROM chat_sessions")).scalar_one()
'''

PLANTED_MIGRATION = """
def upgrade(conn):
    conn.exec_driver_sql("UPDATE public.personas SET name = name WHERE false")
"""

PLANTED_READER = """
def drain(batches):
    return [row for batch in batches for row in batch]
"""

FILES = {"chat/migrations/planted_0001": PLANTED_MIGRATION, "chat/planted_repository": PLANTED_REPOSITORY,
         "chat/planted_service": PLANTED_SERVICE, "chat/planted_servicer": PLANTED_SERVICER,
         "chat/planted_support": PLANTED_SUPPORT, "chat/planted_jobs": PLANTED_JOBS,
         "privacy/planted_service": PLANTED_READER}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The planted modules, as `persona_service.<domain>.<name>` (their files in a package folder of their own)."""
    root = tmp_path_factory.mktemp("plants") / "persona_service"
    modules = {}
    for name, source in FILES.items():
        path = root / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
        spec = importlib.util.spec_from_file_location("persona_service." + name.replace("/", "."), path)
        assert spec is not None and spec.loader is not None
        modules[name] = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[name])
    yield modules
    for name in FILES:
        sys.modules.pop("persona_service." + name.replace("/", "."), None)


@pytest.fixture()
def guarded(stack):
    """An engine with the guard on it (engine_for installs it), the process's checks on, then as they were."""
    was = boundaries.guarding(True)
    with engine_for(stack, pool_size=2) as engine:
        try:
            yield engine
        finally:
            boundaries.guarding(was)


@pytest.fixture()
def unit_of_work(guarded):
    uow = UnitOfWork(guarded)
    try:
        yield uow
    finally:
        uow.close()


@pytest.fixture()
def listener():
    """A local TCP listener's address (accepts and closes)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[:2]
    stop.set()
    thread.join()
    server.close()


ANOTHER_DOMAINS_TABLES = ["subquery_string", "lightweight_table", "schema_qualified", "quoted", "from_the_metadata",
                          "in_a_cte", "on_the_driver_cursor", "as_a_prepared_read", "handed_to_the_export_port"]


@pytest.mark.parametrize("plant", ANOTHER_DOMAINS_TABLES)
def test_sql_naming_another_domains_table_is_refused_however_spelt(planted, unit_of_work, plant):
    with pytest.raises(BoundaryViolation, match=r"chat/planted_repository\.py touched .*another domain's tables"):
        getattr(planted["chat/planted_repository"], plant)(unit_of_work.conn)


def test_a_declared_ports_statement_is_its_builders_not_its_runners(planted, unit_of_work):
    """The privacy export's loop runs each module's batches (kernel.data.personal_data): chat's own rows, run
    from another domain's code, pass, as they are checked where chat's repository hands them over."""
    batches = planted["chat/planted_repository"].its_own_rows_for_export(unit_of_work.conn)
    planted["privacy/planted_service"].drain(batches)


def test_a_modules_migration_touching_another_modules_table_is_refused(planted, unit_of_work):
    with pytest.raises(BoundaryViolation, match=r"chat/planted_0001\.py touched personas"):
        planted["chat/migrations/planted_0001"].upgrade(unit_of_work.conn)


@pytest.mark.parametrize("plant", ["own_and_kernel_tables", "through_a_read_port"])
def test_its_own_tables_the_kernels_and_a_read_port_pass(planted, unit_of_work, plant):
    getattr(planted["chat/planted_repository"], plant)(unit_of_work.conn)


@pytest.mark.parametrize(("file", "plant", "message"), [
    ("planted_repository", "commits_its_connection", "committed a unit of work's transaction"),
    ("planted_servicer", "commits_the_unit_of_works_transaction", "committed a unit of work's transaction"),
    ("planted_repository", "commits_in_sql", "ended a transaction in SQL"),
    ("planted_repository", "commits_the_driver", "committed the driver's connection"),
    ("planted_repository", "opens_a_transaction_of_its_own", r"\(repository\) committed a transaction"),
])
def test_a_commit_outside_the_unit_of_work_is_refused(planted, unit_of_work, file, plant, message):
    unit_of_work.conn.exec_driver_sql("SELECT 1")  # (the driver's transaction begun, as a call's would be)
    with pytest.raises(BoundaryViolation, match=message):
        getattr(planted["chat/" + file], plant)(unit_of_work.conn)


def test_a_servicer_committing_a_connection_of_its_own_is_refused(planted, guarded):
    with pytest.raises(BoundaryViolation, match=r"\(servicer\) committed a transaction"):
        planted["chat/planted_servicer"].commits_a_connection_of_its_own(guarded)


def test_the_unit_of_works_commit_and_a_jobs_transaction_pass(planted, unit_of_work, guarded):
    planted["chat/planted_repository"].own_and_kernel_tables(unit_of_work.conn)
    unit_of_work.commit()
    assert planted["chat/planted_jobs"].in_a_transaction_of_its_own(guarded) >= 0


@pytest.mark.parametrize(("file", "plant"), [
    ("planted_repository", "connects"), ("planted_repository", "resolves"), ("planted_repository", "fetches"),
    ("planted_repository", "with_httpx"), ("planted_service", "asks_over_http"),
])
def test_network_from_a_repository_or_service_is_refused(planted, guarded, listener, file, plant):
    with pytest.raises(BoundaryViolation, match="opened a network connection"):
        getattr(planted["chat/" + file], plant)(listener)


def test_a_client_files_connection_passes(planted, guarded, listener):
    planted["chat/planted_support"].connects(listener)


@pytest.mark.parametrize("plant", ["reads_redis", "pipelines", "publishes", "subscribes"])
def test_redis_from_a_domain_is_refused(planted, guarded, stack, plant):
    with pytest.raises(BoundaryViolation, match="sent a Redis command itself"):
        getattr(planted["chat/planted_servicer"], plant)(stack.redis_url)


def test_redis_through_a_capabilitys_private_client_is_refused(planted, guarded, stack):
    client = redis.Redis.from_url(stack.redis_url)
    try:
        with pytest.raises(BoundaryViolation, match="sent a Redis command itself"):
            planted["chat/planted_servicer"].reads_a_capabilitys_client(Hints(client))
    finally:
        client.close()


def test_redis_through_a_kernel_capability_passes(planted, guarded, stack):
    client = redis.Redis.from_url(stack.redis_url)
    try:
        planted["chat/planted_service"].through_a_kernel_capability(Hints(client))
    finally:
        client.close()


def test_off_it_lets_everything_through(planted, stack, listener):
    """Production's default: nothing is checked (the hooks this process holds are idle)."""
    with engine_for(stack, pool_size=1) as engine:
        was = boundaries.guarding(False)
        try:
            with engine.connect() as conn:
                planted["chat/planted_repository"].schema_qualified(conn)
            planted["chat/planted_repository"].connects(listener)
        finally:
            boundaries.guarding(was)
