"""Settings: every environment variable, typed, with its default and meaning.

One mechanism (pydantic-settings) for the whole service. The kernel's
variables are `Settings`; a module declares its own section (a `Section`
subclass) in its `Module`, shared infrastructure (providers) has its own.
A process reads each section once, through `load(SectionClass)`. A value that
does not parse is an `InvalidSetting` naming the variable, which the CLI
prints as one line (exit 2). `persona-service settings` prints every
variable as the Markdown table docs/configuration.md holds.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import os
import pathlib
import secrets
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar, get_args, get_origin, overload

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

S = TypeVar("S", bound=BaseSettings)


class Section(BaseSettings):
    """Base of every settings section: variables are `PERSONA_<FIELD>` unless a
    field names its variable with `validation_alias`; an empty variable means
    the default; fields are also settable by name (`Settings(http_port=...)`)."""

    model_config = SettingsConfigDict(
        env_prefix="PERSONA_", env_ignore_empty=True, populate_by_name=True, frozen=True, extra="ignore",
    )


_Port = Annotated[int, Field(ge=1, le=65535)]



def _comma_list(value: object) -> tuple[str, ...]:
    """A comma-separated environment value (or a sequence) as its non-empty items."""
    if isinstance(value, str):
        items: Iterable[str] = value.split(",")
    elif isinstance(value, Iterable):
        items = value  # (a sequence given by name: its items are strings, an item of another type fails here)
    else:
        raise TypeError(f"'{type(value).__name__}' object is not iterable")
    return tuple(item.strip() for item in items if item.strip())

class Settings(Section):
    """The kernel's variables."""

    env: Literal["production", "development"] = Field(
        "production", validation_alias="PERSONA_ENV",
        description="`development` relaxes what only a laptop needs relaxed: webhook deliveries to `http` and "
                    "private addresses (a local receiver) unless PERSONA_WEBHOOKS_ALLOW_PRIVATE says otherwise",
    )

    data_dir: pathlib.Path = Field(
        pathlib.Path(".persona"),
        description="embedded PostgreSQL and Redis data, logs, generated Envoy config, JWT secret",
    )
    database_url: str = Field(
        "", validation_alias="DATABASE_URL",
        description="external PostgreSQL (`postgresql://…`); empty: the embedded one under the data dir",
    )
    database_replica_url: str = Field(
        "", description="a streaming replica of the database (`postgresql://…`; behind HAProxy, its replica port) "
                        "that the reads declared `read_may_lag` use, with read-your-writes for the caller's "
                        "organization (docs/scaling-out.md \"Reads from replicas\"); empty: every read on the primary",
    )
    database_replica_max_lag_seconds: float = Field(
        5.0, gt=0, le=3600, allow_inf_nan=False,
        description="a replica that has not replayed what the primary wrote this long ago, or that does not answer, "
                    "is out of rotation (its reads go to the primary) until it catches up",
    )
    redis_url: str = Field(
        "", validation_alias="REDIS_URL",
        description="external Redis (`redis://…`), or a master Redis Sentinel fails over "
                    "(`redis+sentinel://host:26379,host2:26379/mymaster/0`: docs/scaling-out.md); empty: the embedded "
                    "one under the data dir",
    )
    http_port: _Port = Field(8080, description="Envoy: HTTP/1.1 JSON and native gRPC (h2c)")
    http_host: str = Field(
        "127.0.0.1", description="address Envoy's public listener binds: `0.0.0.0` (or `::`) to serve other hosts, "
                                 "behind TLS termination and a firewall in production",
    )
    edge_request_timeout_seconds: int = Field(
        30, ge=1, description="a client must send its whole request (headers and body) within this; "
                              "else 408 `request_timeout`",
    )
    edge_max_connections: int = Field(
        10_000, ge=1, description="open client connections Envoy accepts at once (beyond: closed at once)",
    )
    access_log_format: Literal["json", "text"] = Field(
        "json", description="Envoy's access log (`<data dir>/logs/access.log`), one line per request with the "
                            "client's method and path, status, duration, request id and W3C trace id: `json` or `text`",
    )
    edge_secret: str = Field(
        "", description="shared secret Envoy adds to every call (`x-persona-edge-secret`); a server trusts the client "
                        "address Envoy reports only with it. Empty: `up` makes one per start; set it on both sides "
                        "when Envoy and the servers are deployed apart",
    )
    grpc_port: _Port = Field(
        50051, description="the gRPC server itself (127.0.0.1); further processes take the next ports",
    )
    grpc_host: str = Field(
        "127.0.0.1", description="address a server process listens on (its gRPC and stream ports): `0.0.0.0` for a "
                                 "stream server that the edges of other pods reach (deploy/kubernetes)",
    )
    edge_stream_servers: str = Field(
        "", description="`host:port` of the stream servers the edge sends every server stream to (a DNS name every "
                        "stream server's address answers for, e.g. a headless Service; each is health-checked); "
                        "empty: the server process behind the edge serves its streams",
    )
    grpc_workers: int = Field(
        4, ge=1,
        description="unary worker threads per server process (4 measured ~20% more throughput than 8: fewer GIL "
                    "hand-offs); streams and their runs have threads of their own",
    )
    stream_port_offset: int = Field(
        1000, ge=1, le=10_000,
        description="each server process serves server streams (SSE) on its gRPC port plus this offset, with its "
                    "own threads and database pool, so open streams never take a unary worker",
    )
    stream_workers: int = Field(
        256, ge=1, description="threads (= concurrent open streams) per server process; beyond them a new stream "
                               "is refused at once (429) instead of queued",
    )
    drain_seconds: float = Field(
        2.0, ge=0, le=60,
        description="on SIGTERM a server process first fails its health checks (NOT_SERVING) and goes on serving "
                    "this long, so balancers take it out of rotation before it stops accepting calls (the edge "
                    "probes every 0.5 s; under Kubernetes, at least the readiness probe's period × failureThreshold)",
    )
    shutdown_grace_seconds: float = Field(
        10.0, ge=0, le=300,
        description="after draining, how long unary calls in flight may take to finish before they are cancelled "
                    "(open streams end at once, their runs handed over: clients resume on another process with "
                    "`Last-Event-ID`; a new stream first gets its first frame, within this time too)",
    )
    stream_db_pool_size: int = Field(
        8, ge=1, description="PostgreSQL connections per server process for streams and their runs (`up` sets it "
                             "from db_connections)",
    )
    rate_limit_lease_max: int = Field(
        64, ge=1,
        description="most rate-limit units a server process reserves in Redis at once for calls of one organization "
                    "(admitted without a Redis round trip for up to a second; never over-admits); 1 turns leases off",
    )
    limit_override_ceiling: float = Field(
        10, ge=1, le=1000, allow_inf_nan=False,
        description="how far an Enterprise organization may raise each `api.rate_limit.*` limit, as a multiple of "
                    "the Enterprise plan's default (10: at most 60000 requests a minute, 500 concurrent "
                    "generations, …); a higher value is refused (422 `validation_failed` naming the maximum)",
    )
    redis_max_connections: int = Field(
        32, ge=2,
        description="Redis connections per server process, shared by the limiter, caches, runs and the invalidation "
                    "bus (which holds one); a call finding all in use waits for one instead of failing",
    )
    redis_acquire_timeout_seconds: float = Field(
        0.5, gt=0, le=30, allow_inf_nan=False,
        description="how long a call waits for a free Redis connection before treating Redis as unavailable",
    )
    run_workers: int = Field(
        16, ge=1,
        description="threads per runner process running streamed operations (durable runs: generations, replies); "
        "beyond them runs wait their turn, organizations taking turns weighted by plan",
    )
    run_lease_seconds: float = Field(
        10.0, ge=0.5, le=300, allow_inf_nan=False,
        description="a streamed run's lease (renewed every third of it while its process runs it): how soon after "
                    "its process dies another process takes the run over and its stream goes on",
    )
    run_outage_seconds: float = Field(
        30.0, gt=0, le=600, allow_inf_nan=False,
        description="how long a streamed run whose database connection dropped (a PostgreSQL or PgBouncer restart) "
                    "waits for the database before it ends failed with a retryable error; its stream stays open. A "
                    "stream's view waits as long for Redis (a restart, a Sentinel failover)",
    )
    generation_turns: int | None = Field(
        None, ge=1,
        description="model steps (a stream's work up to its next frame, a model call of a unary operation) computed "
                    "at once per runner process; the others wait their turn, organizations taking turns weighted by plan, so one "
                    "organization's streams cannot starve another's (or the process's unary calls) of CPU. Unset: 1 "
                    "with the local chat model (its steps are CPU work), and with an HTTP chat model as many as the "
                    "runner's threads that make model calls (PERSONA_GRPC_WORKERS + PERSONA_RUN_WORKERS): such a call "
                    "waits on the network holding no CPU, and one turn let a runner answer one call per model latency",
    )
    task_workers: int = Field(
        2, ge=1, description="threads per runner process running durable tasks (portrait renders, …), on the "
                             "stream pool's connections",
    )
    task_poll_seconds: float = Field(
        1.0, gt=0, le=60, allow_inf_nan=False,
        description="how often an idle runner looks for runs and tasks without being told (a safety net: a "
                    "notification wakes it at once)",
    )
    # The server is GIL-bound, so a second process adds throughput when a core has room.
    server_processes: int = Field(
        2, description="gRPC server processes behind Envoy (two measured +35–70% throughput over one on 2 cores)",
    )
    stream_server_processes: int = Field(
        1, ge=0,
        description="server processes `up` starts beside PERSONA_SERVER_PROCESSES that serve only stream views "
                    "(the edge sends every server stream to them and no unary call), so a stream's frames never "
                    "share a GIL with another organization's unary calls; 0: every server serves both",
    )
    runner_processes: int = Field(
        1, ge=0,
        description="runner processes `up` starts: they run the streamed runs, durable tasks and every call of "
                    "the model (server processes only serve); scale them for model load, servers for calls (0: "
                    "runners run elsewhere, on the same PostgreSQL and Redis)",
    )
    runner_priority: Literal["idle", "nice"] = Field(
        "idle",
        description="a runner's CPU scheduling on a shared machine: `idle` (Linux SCHED_IDLE: the model's work runs "
                    "only on CPU time no server, Envoy, database or client wants, so it never delays a call) or "
                    "`nice` (it lowers its priority by PERSONA_RUNNER_NICE and still takes a share under load); "
                    "`nice` where a runner has its own machine or pod",
    )
    runner_nice: int = Field(
        5, ge=0, le=19,
        description="with PERSONA_RUNNER_PRIORITY=nice, how much a runner lowers its CPU scheduling priority "
                    "(os.nice) so that the servers' calls and stream views go before the model's work; 0 keeps it",
    )
    background_cpu_share: float = Field(
        0.5, gt=0, le=1, allow_inf_nan=False,
        description="the share of the cores `up` may use that its runners and stream servers are pinned to (the "
                    "last ones, at least one; nothing is pinned on fewer than 2 cores): unary servers, Envoy and "
                    "the databases keep every core, so model work and stream views never take all the cores a "
                    "quiet tenant's calls need (measured: its read p99 x2.2-2.7 of alone under three "
                    "organizations' streams with the runner pinned to one core of two, x3.0-8.7 unpinned); 1: no "
                    "pinning",
    )
    model_call_timeout_seconds: float = Field(
        60.0, gt=0, le=600, allow_inf_nan=False,
        description="how long a server process waits for a runner to answer a call of the model (a unary "
                    "operation's completion, moderation, embeddings, …) before it fails as `provider_timeout`",
    )
    db_connections: int = Field(
        90, ge=4,
        description="PostgreSQL connections all processes `up` starts may hold together (keep it under PostgreSQL's "
                    "max_connections); each server process gets an equal share of what the workers leave. Beyond "
                    "what PostgreSQL allows, put PgBouncer between the processes and PostgreSQL (docs/scaling-out.md)",
    )
    db_pool_size: int = Field(
        16, ge=1, description="PostgreSQL connections per server process for unary calls (`up` sets it from "
                              "db_connections)",
    )
    db_prepared_statements: bool = Field(
        True, description="server-side prepared statements for hot reads; turn off behind a pooler that does not "
                          "track them (PgBouncer before 1.21, or without `max_prepared_statements`, in transaction "
                          "mode: docs/scaling-out.md)",
    )
    lock_guard: bool = Field(
        False, description="check every statement of a writing transaction: an aggregate's rows (a chat session's "
                           "messages, a webhook endpoint's deliveries) are read or changed only once its root row is "
                           "locked, else the call fails with a 500 (kernel/data/aggregates.py; the test stacks turn "
                           "it on)",
    )
    boundary_guard: bool = Field(
        False, description="check what domains' code does as it runs: SQL naming another domain's tables, a commit "
                           "outside its unit of work, network from a service or repository, Redis but through the "
                           "kernel each fail the call with a 500 (kernel/data/boundaries.py; the test stacks turn it "
                           "on)",
    )
    auth_cache_seconds: int = Field(
        30, ge=0,
        description="how long a verified credential is trusted without a database read "
                    "(revocation evicts at once, in every process, through Redis)",
    )
    read_cache_entries: int = Field(
        10_000, ge=0,
        description="rows of each hot read (a chat session) a server process keeps in memory, least recently "
                    "used dropped first; a write evicts what it changed in every process before it answers; "
                    "0 turns the cache off",
    )
    audit_retention_days: int = Field(
        400, ge=0,
        description="how long the audit log keeps an entry: a month's partition is dropped once its whole month is "
                    "older than this, so entries live this long at least and a month more at most (those from before "
                    "the log was partitioned, one partition, go when the newest of them is this old). The "
                    "specification states no retention for the audit log; 400 days keeps a year for a yearly audit, "
                    "with a month's slack. 0: kept forever",
    )
    event_retention_days: int = Field(
        90, ge=0,
        description="how long the event log (GET /v1/events, and the events webhook deliveries send and replay) "
                    "keeps an event: a month's partition is dropped once its whole month is older than this, so "
                    "events live this long at least and a month more at most. The specification states no "
                    "retention for events; 90 days keeps a quarter for a receiver to reconcile from the feed or "
                    "replay a dead-lettered delivery, far past the retries' 2 h 38 min. 0: kept forever",
    )
    jwt_secret: str = Field(
        "", description="HS256 secret for session JWTs and cursors; empty: one generated and kept in the data dir",
    )
    jwt_ttl_seconds: int = Field(3600, ge=1, description="session JWT lifetime")
    trusted_proxies: Annotated[tuple[str, ...], NoDecode] = Field(
        ("127.0.0.1/32", "::1/128"),
        description="networks the edge connects from; its reported client address is trusted only from these, "
                    "and only with the edge secret",
    )
    log_level: str = Field("INFO", description="log level of the server and worker processes (`DEBUG`, `INFO`, `WARNING`, `ERROR`, `CRITICAL`)")
    log_format: Literal["json", "text"] = Field(
        "json", description="process logs on stderr (under `<data dir>/logs/` with `up`): one JSON object per line "
                            "(time, level, logger, message, and a request's id, RPC, status, code, org, workspace, "
                            "principal, latency) or `text`",
    )
    secrets_key: str = Field(
        "", description="Fernet key encrypting secrets at rest (webhook signing secrets); "
                        "empty: one generated and kept in the data dir",
    )
    otlp_endpoint: str = Field(
        "", description="OpenTelemetry: export traces over OTLP/HTTP to this collector (e.g. `http://collector:4318`; "
                        "spans for each RPC, its SQL and Redis calls, provider calls, webhook deliveries); empty: off",
    )
    extra_modules: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="modules outside the registry to load as well, comma-separated `package.module:NAME` "
                        "(a `kernel.module.Module`; its proto descriptor set joins the edge's)",
    )

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: pathlib.Path) -> pathlib.Path:
        return value.resolve()

    @field_validator("extra_modules", mode="before")
    @classmethod
    def _module_refs(cls, value: object) -> tuple[str, ...]:
        refs = _comma_list(value)
        for ref in refs:
            if ref.count(":") != 1:
                raise ValueError(f"{ref!r} is not `package.module:NAME`")
        return refs

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _networks(cls, value: object) -> tuple[str, ...]:
        networks = _comma_list(value)
        for network in networks:
            ipaddress.ip_network(network, strict=False)  # ValueError names the bad one
        return networks

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in logging.getLevelNamesMapping():
            raise ValueError("expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    def resolved_jwt_secret(self) -> str:
        """The JWT signing secret: PERSONA_JWT_SECRET, else one kept in the data dir."""
        if self.jwt_secret:
            return self.jwt_secret
        return self._kept_secret("jwt-secret", lambda: secrets.token_urlsafe(48))

    def resolved_secrets_key(self) -> str:
        """The Fernet key for secrets at rest: PERSONA_SECRETS_KEY, else one kept in the data dir."""
        if self.secrets_key:
            return self.secrets_key
        import base64

        return self._kept_secret("secrets-key", lambda: base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())

    def _kept_secret(self, name: str, make: Callable[[], str]) -> str:
        path = self.data_dir / name
        if not path.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{name}.{os.getpid()}.tmp")
            tmp.write_text(make())
            tmp.chmod(0o600)
            try:
                os.link(tmp, path)  # first writer wins when processes race
            except FileExistsError:
                pass
            tmp.unlink()
        return path.read_text().strip()


# --- reading ------------------------------------------------------------------------


class InvalidSetting(ValueError):
    """A variable whose value does not parse; the message is one line naming it."""


def read(section: type[S]) -> S:
    """Read a section from the environment now (`load` reads it once per process)."""
    try:
        return section()
    except ValidationError as exc:
        raise InvalidSetting(_describe_error(section, exc.errors()[0])) from None


@functools.cache
def _load(section: type[BaseSettings]) -> BaseSettings:
    return read(section)


@overload
def load() -> Settings: ...
@overload
def load(section: type[S]) -> S: ...
def load(section: type[BaseSettings] = Settings) -> BaseSettings:  # noqa: E302 - overloads stay together
    """The section as this process read it (once); the kernel's by default."""
    return _load(section)


def forget() -> None:
    """Drop what `load` read, so the next call reads the environment again."""
    _load.cache_clear()


def check(sections: Iterable[type[BaseSettings]]) -> None:
    """Load every section, so that a bad value stops a process before it starts work."""
    for section in sections:
        load(section)


def env_name(section: type[BaseSettings], field: str) -> str:
    """The environment variable of one field."""
    alias = section.model_fields[field].validation_alias
    return alias if isinstance(alias, str) else f"{section.model_config.get('env_prefix', '')}{field}".upper()


def env_names(section: type[BaseSettings]) -> list[str]:
    return [env_name(section, field) for field in section.model_fields]


_PHRASES = {
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "bool_parsing": "expected a boolean (true/false, 1/0, yes/no, on/off)",
    "dict_type": "expected a JSON object",
}


def _describe_error(section: type[BaseSettings], error: ErrorDetails) -> str:
    loc = error["loc"]
    fields = {name: name for name in section.model_fields}
    fields.update({f.validation_alias: name for name, f in section.model_fields.items() if isinstance(f.validation_alias, str)})
    name = env_name(section, fields[loc[0]]) if loc and loc[0] in fields else str(loc[0] if loc else section.__name__)
    value = repr(os.environ[name]) if name in os.environ else "(not set)"
    ctx = error.get("ctx") or {}
    kind = error["type"]
    if kind in _PHRASES:
        reason = _PHRASES[kind]
    elif kind == "value_error":
        reason = str(ctx["error"])
    elif kind == "literal_error":
        reason = f"expected {ctx['expected']}"
    elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = next(iter(ctx.values()))
        reason = {"greater_than_equal": "at least", "greater_than": "more than",
                  "less_than_equal": "at most", "less_than": "less than"}[kind]
        reason = f"expected {reason} {_number(bound)}"
    else:
        reason = error["msg"][:1].lower() + error["msg"][1:]
    where = ".".join(str(part) for part in loc[1:])
    return f"invalid setting {name}={value}: {where + ': ' if where else ''}{reason}"


# --- the reference table --------------------------------------------------------------


def markdown_table(sections: Iterable[type[BaseSettings]]) -> str:
    """Every variable of these sections: name, type, default and meaning."""
    rows = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for section in sections:
        for field, info in section.model_fields.items():
            cells = (f"`{env_name(section, field)}`", _type_name(info.annotation, info.metadata),
                     _default(info.get_default(call_default_factory=True)), info.description or "")
            rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"


_TYPE_NAMES: dict[object, str] = {int: "integer", float: "number", bool: "boolean", str: "string", pathlib.Path: "path"}


def _type_name(annotation: object, metadata: list[object]) -> str:
    if get_origin(annotation) is Literal:
        name = " or ".join(f"`{choice}`" for choice in get_args(annotation))
    elif get_origin(annotation) is tuple:
        name = "comma-separated list"
    elif get_origin(annotation) is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        name = "JSON object"
    else:
        name = _TYPE_NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))
    bounds = {k: getattr(m, k) for m in metadata for k in ("ge", "gt", "le") if getattr(m, k, None) is not None}
    if "ge" in bounds and "le" in bounds:
        return f"{name}, {bounds['ge']}–{bounds['le']}"
    if "ge" in bounds:
        return f"{name} ≥ {_number(bounds['ge'])}"
    if "gt" in bounds:
        return f"{name} > {_number(bounds['gt'])}"
    return name


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _default(value: object) -> str:
    if value in ("", None):
        return "(empty)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{_number(value)}`"
    if isinstance(value, tuple):
        return f"`{','.join(value)}`"
    if isinstance(value, dict):
        return f"`{json.dumps({k: v.model_dump() if isinstance(v, BaseModel) else v for k, v in value.items()})}`"
    return f"`{value}`"
