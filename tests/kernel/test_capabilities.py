"""What a servicer is handed (`ServicerDeps`) reaches no raw Redis client, engine, pool, database
connection, socket nor Settings, however it is spelled (docs/architecture.md, "What a servicer is
handed"). The check walks the object graph, not names: from the deps through public attributes,
items of containers, bound methods' `__self__`, `functools.partial`'s function and arguments, and
functions' closure cells, defaults and `__wrapped__`; and what an object of the package hands out of its private
state by its public surface: a property's (or cached_property's) value, a public method's `return self._x...`, and
`self._x...` passed to a callable its caller supplies (`resource.open(self._settings)`), read from the method's
source and evaluated on the object (nothing is called). Private attributes (`_name`) are the boundary an object
keeps; classes and modules are not walked (what a module imports, any code may import).
A capability that must reach one of these kinds to do its work is allowed to, by name, in ALLOWED.

Builds the App the way a process that serves calls does (a server, and a one-process `all`), without a stack:
nothing connects until asked (the last test, on the stack's database, shows that `read_apart` reads and cannot
write)."""

from __future__ import annotations

import ast
import functools
import inspect
import socket
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from types import BuiltinMethodType, FunctionType, MethodType, ModuleType, SimpleNamespace
from typing import TypeVar
from unittest.mock import NonCallableMock

import psycopg
import pytest
import redis
import sqlalchemy
from persona_service.kernel.resources import Resource, ServicerDeps, plain
from persona_service.kernel.settings import Settings
from persona_service.kernel.transport.hints import Hints
from persona_service.process.app import App
from sqlalchemy.pool import Pool

# What no servicer may hold: each kind, by the types that are it.
FORBIDDEN: dict[str, tuple[type, ...]] = {
    "redis": (redis.Redis, redis.ConnectionPool),
    "engine": (sqlalchemy.Engine, Pool),
    "connection": (sqlalchemy.Connection, psycopg.Connection),
    "socket": (socket.socket,),
    "settings": (Settings,),  # the database URL, the JWT secret, the secrets key
}

# Capability (a ServicerDeps field) -> the kinds it may reach, and why.
ALLOWED: dict[str, tuple[frozenset[str], str]] = {
    "readiness": (frozenset({"engine", "redis"}),
                  "the readiness checks: a read of the applied migrations on the pool and Redis's PING"),
    "read_apart": (frozenset({"engine"}), "a read-only connection of its own from the pool, closed after the read"),
    "quota": (frozenset({"engine"}), "the limits resolver reads an enterprise's overrides when the caller has no connection"),
    "limits": (frozenset({"engine"}), "as quota: the same resolver"),
    "provider_for": (frozenset({"engine", "redis"}),
                     "failed upstream attempts are audited in a transaction of their own on the unary pool; a "
                     "server's provider queues its model calls for the runners in Redis (providers.remote)"),
    "generations_used": (frozenset({"engine", "redis"}),
                         "the rate limiter's Redis counter, and the limits resolver (it holds the unary pool for "
                         "quota and limits; the period and what was drawn are read on the caller's connection)"),
    "invalidate": (frozenset({"redis"}),
                   "publishes on Redis (to every server process, or to a row's holders) and waits for their acks"),
}
# A path (how it is reached, as `Reach.path` says it) -> the kinds reached there, and why: narrower than a capability.
ALLOWED_PATHS: dict[str, tuple[frozenset[str], str]] = {
    "deps.resources.get(-> resource.open)": (
        frozenset({"settings"}),
        "Resources.get opens a module's Resource with the process's settings (once per App): only the Resources "
        "the modules declare (Module.resources) open, and each of those is opened and walked here "
        "(test_no_declared_resource_hands_out_anything_raw); any other is refused (UndeclaredResource)"),
}

T = TypeVar("T")
ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None), type, ModuleType)
# SQL as data (a repository's columns, tables, statements): bound to no connection in SQLAlchemy 2, and walked into they
# are a maze of dispatch internals.
SQL_DATA = (sqlalchemy.sql.ClauseElement, sqlalchemy.schema.SchemaItem, sqlalchemy.types.TypeEngine)


@dataclass(frozen=True)
class Reach:
    path: str  # how it is reached from the deps, e.g. `deps.hints.client`
    kind: str

    @property
    def capability(self) -> str:
        return self.path.split(".")[1].split("[")[0]


def _kind(value: object) -> str | None:
    return next((kind for kind, types in FORBIDDEN.items() if isinstance(value, types)), None)


def _public_attributes(value: object) -> Iterator[tuple[str, object]]:
    names = [*getattr(value, "__dict__", {})]
    names += [slot for cls in type(value).__mro__ for slot in getattr(cls, "__slots__", ()) if isinstance(slot, str)]
    for name in dict.fromkeys(names):
        if not name.startswith("_") and hasattr(value, name):
            yield f".{name}", getattr(value, name)


def _items(value: object) -> Iterator[tuple[str, object]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield f"[{key!r}]", key
            yield f"[{key!r}]", item
    elif isinstance(value, list | tuple | set | frozenset):
        yield from ((f"[{i}]", item) for i, item in enumerate(value))


def _function_parts(value: object) -> Iterator[tuple[str, object]]:
    if isinstance(value, functools.partial):
        yield from [(".func", value.func), *((f".args[{i}]", a) for i, a in enumerate(value.args)),
                    *((f".keywords[{k!r}]", v) for k, v in value.keywords.items())]
    if isinstance(value, MethodType | BuiltinMethodType) and not isinstance(value.__self__, ModuleType):
        yield ".__self__", value.__self__
    if isinstance(value, FunctionType):
        cells = zip(value.__code__.co_freevars, value.__closure__ or (), strict=True)
        yield from ((f".<closure {name}>", cell.cell_contents) for name, cell in cells if _filled(cell))
        yield from ((f".<default {i}>", d) for i, d in enumerate(value.__defaults__ or ()))
        yield from ((f".<default {k}>", d) for k, d in (value.__kwdefaults__ or {}).items())
        if hasattr(value, "__wrapped__"):
            yield ".__wrapped__", value.__wrapped__


def _filled(cell: object) -> bool:
    try:
        cell.cell_contents  # type: ignore[attr-defined]  # noqa: B018
    except ValueError:  # a cell not yet assigned
        return False
    return True


def _self_chain(node: ast.expr, me: str) -> list[str] | None:
    """`self.a.b` as ['a', 'b'] (`me` is the method's first parameter); None for anything else."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.insert(0, node.attr)
        node = node.value
    return names if names and isinstance(node, ast.Name) and node.id == me else None


def _follow(value: object, names: list[str]) -> object:
    for name in names:
        value = inspect.getattr_static(value, name, None)
        if isinstance(value, property | functools.cached_property | staticmethod | classmethod) or value is None:
            return None  # a getter or a descriptor: not evaluated here
    return value


@functools.cache
def _handed_out(function: FunctionType) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What a method of the package hands out of its object: (how, the `self` chain) for each `return self.x...`
    and each `self.x...` passed to a callable reached from another parameter (`read(self._conn)`,
    `resource.open(self._settings)`): read from its source."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return ()
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef | ast.AsyncFunctionDef) or not definition.args.args:
        return ()
    me, others = definition.args.args[0].arg, {a.arg for a in [*definition.args.args[1:], *definition.args.kwonlyargs]}
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(definition):
        if isinstance(node, ast.Return | ast.Yield) and node.value is not None:
            chain = _self_chain(node.value, me)
            if chain:
                found.append(("()", tuple(chain)))
        elif isinstance(node, ast.Call):
            root = node.func
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in others:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    chain = _self_chain(arg, me)
                    if chain:
                        found.append((f"(-> {ast.unparse(node.func)})", tuple(chain)))
    return tuple(found)


def _surface(value: object) -> Iterator[tuple[str, object]]:
    """What an object of the package hands out of its private state through its public properties and methods."""
    cls = type(value)
    if not cls.__module__.startswith("persona_service"):
        return
    for name in dir(cls):
        if name.startswith("_"):
            continue
        member = inspect.getattr_static(cls, name, None)
        function = member.fget if isinstance(member, property) else member.func \
            if isinstance(member, functools.cached_property) else member
        if not isinstance(function, FunctionType):
            continue
        for how, chain in _handed_out(function):
            held = _follow(value, list(chain))
            if held is not None:
                yield f".{name}{'' if isinstance(member, property | functools.cached_property) else how}", held


def _edges(value: object) -> Iterator[tuple[str, object]]:
    if isinstance(value, ATOMS + SQL_DATA):
        return
    yield from _items(value)
    yield from _function_parts(value)
    yield from _public_attributes(value)
    yield from _surface(value)


def reach(deps: ServicerDeps) -> list[Reach]:
    """Every forbidden object each capability reaches (walked per capability: what one reaches first does
    not hide it from another), not walked past."""
    return [found for f in fields(deps) for found in _reach_from(f"deps.{f.name}", getattr(deps, f.name))]


def _reach_from(path: str, start: object) -> Iterator[Reach]:
    seen, todo = {id(start)}, [(path, start)]
    while todo:
        path, value = todo.pop()
        kind = _kind(value)
        if kind is not None:
            yield Reach(path, kind)
            continue
        for step, next_value in _edges(value):
            if id(next_value) not in seen:
                seen.add(id(next_value))
                todo.append((path + step, next_value))


def leaks(deps: ServicerDeps) -> list[Reach]:
    """What `deps` reaches that ALLOWED does not grant the capability it is reached through."""
    return [r for r in reach(deps) if r.kind not in ALLOWED.get(r.capability, (frozenset(), ""))[0]
            and r.kind not in ALLOWED_PATHS.get(r.path, (frozenset(), ""))[0]]


# The roles whose processes serve calls: a server (its model calls go to runners) and a one-process App.
ROLES = ("server", "all")


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, App]]:
    from persona_service.registry import MODULES

    settings = Settings(data_dir=tmp_path_factory.mktemp("capabilities"), jwt_secret="test-secret",
                        database_url="postgresql+psycopg://nobody@127.0.0.1:9/none", redis_url="redis://127.0.0.1:9/0")
    built = {role: App(settings, MODULES, role) for role in ROLES}  # nothing connects until asked
    yield built
    for app in built.values():
        app.close()


@pytest.fixture(scope="module")
def app(apps: dict[str, App]) -> App:
    return apps["all"]


@pytest.mark.parametrize("role", ROLES)
def test_a_servicer_reaches_nothing_raw_but_through_an_allowed_capability(apps: dict[str, App], role: str) -> None:
    assert leaks(apps[role].servicer_deps) == []
    # Each module's servicers are handed the same deps but for the modules' ports it declares (Module.needs).
    for service in apps[role].modules.service_names:
        assert leaks(apps[role].servicer_deps_for(service)) == [], service


def test_every_allowance_is_used(apps: dict[str, App]) -> None:
    """An allowance no capability needs any more is removed, so the list says what is reached today (by a
    server's or a one-process App's deps)."""
    reached = {(r.capability, r.kind) for app in apps.values() for r in reach(app.servicer_deps)}
    assert {name for name in ALLOWED if not any(capability == name for capability, _ in reached)} == set()
    assert {name for name, (kinds, _) in ALLOWED.items() if not kinds <= {k for c, k in reached if c == name}} == set()
    assert set(ALLOWED) <= {f.name for f in fields(ServicerDeps)}
    paths = {(r.path, r.kind) for app in apps.values() for r in reach(app.servicer_deps)}
    assert {path for path, (kinds, _) in ALLOWED_PATHS.items() if not {(path, k) for k in kinds} <= paths} == set()


def _never(*_: object) -> bool:
    return False


def _closed_socket() -> socket.socket:
    sock = socket.socket()
    sock.close()
    return sock


def _with_attribute(function: FunctionType, **public: object) -> FunctionType:
    function.__dict__.update(public)
    return function


def _hints_with(**public: object) -> Hints:
    hints = Hints(redis.Redis())  # its client is private: not walked
    hints.__dict__.update(public)
    return hints


class _HintsWithProperty(Hints):
    __module__ = "persona_service.kernel.transport.hints"  # read as the package's code is

    @property
    def raw(self) -> redis.Redis:
        return self._client


class _HintsWithGetter(Hints):
    __module__ = "persona_service.kernel.transport.hints"

    def connection_pool(self) -> object:
        return self._client.connection_pool


class _HintsWithCachedProperty(Hints):
    __module__ = "persona_service.kernel.transport.hints"

    @functools.cached_property
    def backend(self) -> redis.Redis:
        return self._client


class _HintsWithCallback(Hints):
    __module__ = "persona_service.kernel.transport.hints"

    def using(self, work: Callable[[redis.Redis], T]) -> T:
        return work(self._client)


class _SignalsHoldingTheEngine:
    __module__ = "persona_service.kernel.resources"

    def __init__(self, engine: sqlalchemy.Engine) -> None:
        self._engine = engine

    def apart(self, read: Callable[[sqlalchemy.Connection], T]) -> T:
        with self._engine.connect() as conn:
            return read(conn)

    def pool(self) -> object:
        return self._engine.pool


# Leaks planted into a copy of today's deps, each spelled in a way the check names nowhere.
PLANTED = {
    "a lambda closing over the engine": lambda app: {"draining": lambda: app.engine.pool.status() == ""},
    "a partial holding the Redis client": lambda app: {"draining": functools.partial(_never, app.redis)},
    "plain() over a method of the engine": lambda app: {"draining": plain(app.engine.dispose)},
    "a bound method of the App": lambda app: {"draining": app.close},
    "a public attribute chain two levels deep": lambda app: {
        "hints": _hints_with(cache=SimpleNamespace(source=SimpleNamespace(config=app.settings)))},
    "a public client on the hints": lambda app: {"hints": _hints_with(client=app.redis)},
    "settings in a dict in a closure": lambda app: {"draining": (lambda held: lambda: bool(held))({"s": (app.settings,)})},
    "a socket as a default argument": lambda app: {"draining": lambda sock=_closed_socket(): sock.fileno() < 0},
    "a raw driver connection in a list": lambda app: {
        "hints": _hints_with(pool=[NonCallableMock(spec=psycopg.Connection)])},
    "an attribute set on a plain function": lambda app: {"draining": _with_attribute(plain(app.draining.is_set),
                                                                                    pool=app.engine.pool)},
    "the resources exposing their settings": lambda app: {"resources": SimpleNamespace(get=app.resources.get,
                                                                                       settings=app.settings)},
    # Handed out of private state by the public surface (issue 47): the walk reads what methods return.
    "a property returning the private Redis client": lambda app: {"hints": _HintsWithProperty(app.redis)},
    "a public method returning the client's pool": lambda app: {"hints": _HintsWithGetter(app.redis)},
    "a cached_property returning the client": lambda app: {"hints": _HintsWithCachedProperty(app.redis)},
    "a public method handing the client to the caller's callback": lambda app: {"hints": _HintsWithCallback(app.redis)},
    "a capability whose method returns its engine's pool": lambda app: {"tasks": _SignalsHoldingTheEngine(app.engine)},
}


@pytest.mark.parametrize("what", PLANTED)
def test_each_planted_leak_is_caught(app: App, what: str) -> None:
    plants = PLANTED[what](app)
    found = leaks(replace(app.servicer_deps, **plants))
    assert found, f"{what}: not caught"
    assert {r.capability for r in found} <= set(plants), found


def declared_resources() -> list[Resource[object]]:
    """Every Resource the modules declare (`Module.resources`): the only ones `Resources.get` opens."""
    from persona_service.registry import MODULES

    return list(MODULES.resources)


def test_every_resource_of_the_package_is_declared() -> None:
    """A Resource kept at a module's top level but declared by no module could never open (UndeclaredResource):
    each one found is declared, so none is dead code nor a way around the declaration."""
    import sys

    found = {value.name for module in list(sys.modules.values())
             if getattr(module, "__name__", "").startswith("persona_service.")
             for value in vars(module).values() if isinstance(value, Resource)}
    assert found == {r.name for r in declared_resources()}


def resource_leaks(deps: ServicerDeps, resources: list[Resource[object]]) -> list[Reach]:
    """What each resource hands a servicer that asks `deps.resources.get(resource)`, opened (with the fixture's
    settings: local storage, payments and models) and walked like the deps: a resource whose opener hands back
    the settings, or an object keeping them, is a way to them that ALLOWED_PATHS' opener path does not grant."""
    return [found for resource in resources
            for found in _reach_from(f"deps.resources.get({resource.name})", deps.resources.get(resource))]


def test_no_declared_resource_hands_out_anything_raw(app: App) -> None:
    resources = declared_resources()
    assert {r.name for r in resources} >= {"files.storage", "billing.processor"}
    assert resource_leaks(app.servicer_deps, resources) == []


@pytest.mark.parametrize("opener", [lambda settings: settings, lambda settings: SimpleNamespace(held=[settings]),
                                    lambda settings: (lambda: settings)],
                         ids=["the settings", "an object holding them", "a function closing over them"])
def test_a_planted_resource_handing_out_the_settings_is_caught(app: App, opener: Callable[[Settings], object]) -> None:
    """Undeclared, it does not open; declared by a module, the walk of every declared resource finds the leak."""
    from persona_service.kernel.resources import Resources, UndeclaredResource

    planted = Resource("planted", opener)
    with pytest.raises(UndeclaredResource):
        app.servicer_deps.resources.get(planted)
    declared = replace(app.servicer_deps, resources=Resources(app.settings, [*declared_resources(), planted]))
    assert [r.kind for r in resource_leaks(declared, [planted])] == ["settings"]


def test_a_read_apart_reads_and_cannot_write(engine: sqlalchemy.Engine) -> None:
    """`read_apart` hands its read a read-only connection, and the pool gets the connection back as it was."""
    from persona_service.kernel.data.work import Work, connection_of
    from persona_service.kernel.resources import read_apart

    apart, drivers = read_apart(engine), []

    def write(work: Work) -> None:
        conn = connection_of(work)()
        drivers.append(conn.connection.dbapi_connection)
        conn.execute(sqlalchemy.text("CREATE TEMP TABLE read_apart_probe (i int)"))

    def read_only(work: Work) -> object:
        return connection_of(work)().execute(sqlalchemy.text("SHOW transaction_read_only")).scalar()

    assert apart(read_only) == "on"
    with pytest.raises(sqlalchemy.exc.DBAPIError, match="read-only transaction"):
        apart(write)
    assert drivers and not drivers[0].read_only  # reset when it went back to the pool


# --- what a call hands its services: the Work, repositories bound to it, never the connection ---------------------

def _a_call(engine: sqlalchemy.Engine) -> object:
    """A RequestContext as the pipeline builds one, its unit of work opened, with a durable run whose owner holds the
    engine (what a streamed call is handed)."""
    from persona_service.config.repository import ConfigRepository
    from persona_service.kernel.data.uow import UnitOfWork
    from persona_service.kernel.principal import Principal
    from persona_service.kernel.transport.context import RequestContext
    from persona_service.kernel.transport.runs import Run, RunSteps

    ctx = RequestContext(request_id="req_walk", method="/persona.v1.ChatService/SendMessage",
                         uow=UnitOfWork(engine), client_ip="10.0.0.1",
                         principal=Principal("api_key", "key_walk", "org_walk", "ws_walk", "usr_walk", frozenset(),
                                             "owner", "pro", False))
    ctx.run = RunSteps(Run("run_walk", SimpleNamespace(engine=engine), ctx.method))  # type: ignore[arg-type]
    ctx.work.of(ConfigRepository)  # the connection is open: a leak would be there to find
    return ctx


def test_a_call_reaches_no_connection_engine_nor_redis(engine: sqlalchemy.Engine) -> None:
    """What a servicer is handed with each call (`ctx`): its Work, its run's steps and its headers reach nothing raw;
    the unit of work and the run stay private to the kernel (`unit_of_work`, RunSteps' own run)."""
    ctx = _a_call(engine)
    try:
        assert list(_reach_from("ctx", ctx)) == []
    finally:
        from persona_service.kernel.transport.context import unit_of_work

        unit_of_work(ctx).close()  # type: ignore[arg-type]


def domain_repositories() -> list[type]:
    """Every class a domain's repository module defines that takes the connection alone: what `Work.of` binds."""
    import importlib
    import pkgutil

    import persona_service

    found = []
    for info in pkgutil.walk_packages(persona_service.__path__, "persona_service."):
        leaf = info.name.rpartition(".")[2]
        if info.name.startswith(("persona_service.kernel.", "persona_service.process.")) or not (
                leaf == "repository" or leaf.endswith("_repository")):
            continue
        module = importlib.import_module(info.name)
        found += [cls for cls in vars(module).values() if isinstance(cls, type) and cls.__module__ == info.name
                  and list(inspect.signature(cls).parameters) == ["conn"]]
    return found


def repository_leaks(engine: sqlalchemy.Engine, repositories: list[type]) -> list[Reach]:
    """Each repository bound to a Work over an open connection, walked: what it hands out of it to its caller."""
    from persona_service.kernel.data.work import Work

    with engine.connect() as conn:
        work = Work.on(conn)
        return [found for cls in repositories for found in _reach_from(cls.__qualname__, work.of(cls))]


def test_every_repository_keeps_its_connection(engine: sqlalchemy.Engine) -> None:
    """A service holds repositories (`work.of`), so none may hand it the connection: no public attribute, property
    or method of any domain's repository gives it out."""
    repositories = domain_repositories()
    assert len(repositories) >= 15, repositories
    assert repository_leaks(engine, repositories) == []


class _PlantedConnectionRepository:
    """Planted: a repository keeping its connection public."""

    def __init__(self, conn: sqlalchemy.Connection) -> None:
        self.conn = conn


class _PlantedGetterRepository:
    """Planted: a repository handing out its private connection through a method."""

    def __init__(self, conn: sqlalchemy.Connection) -> None:
        self._conn = conn

    def connection(self) -> sqlalchemy.Connection:
        return self._conn


class _PlantedCallbackRepository:
    """Planted: a repository handing its connection to a callback its caller supplies."""

    def __init__(self, conn: sqlalchemy.Connection) -> None:
        self._conn = conn

    def read(self, read: Callable[[sqlalchemy.Connection], T]) -> T:
        return read(self._conn)


@pytest.mark.parametrize("cls", [_PlantedConnectionRepository, _PlantedGetterRepository, _PlantedCallbackRepository],
                         ids=["public", "getter", "callback"])
def test_a_planted_repository_handing_out_its_connection_is_caught(engine: sqlalchemy.Engine, cls: type,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A repository module of its own (`Work.of` binds only the class a repository module defines).
    module = ModuleType("persona_service.chat.planted_repository")
    planted = type(cls.__name__, (cls,), {"__module__": module.__name__})
    setattr(module, planted.__name__, planted)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert planted in [*domain_repositories(), planted]  # (what `Work.of` would bind: a domain's repository module)
    assert [r.kind for r in repository_leaks(engine, [planted])] == ["connection"]


def test_a_planted_call_handing_out_its_unit_of_work_is_caught(engine: sqlalchemy.Engine) -> None:
    """The shape before `Work`: the context's unit of work a public field (`ctx.uow.conn`)."""
    from persona_service.kernel.transport.context import unit_of_work

    ctx = _a_call(engine)
    try:
        ctx.uow = unit_of_work(ctx)  # type: ignore[attr-defined, arg-type]
        assert [(r.path, r.kind) for r in _reach_from("ctx", ctx)] == [("ctx.uow.conn", "connection")]
    finally:
        unit_of_work(ctx).close()  # type: ignore[arg-type]
