"""How long chat waits while the retention retires a month of chat sessions (`chat.partitions`,
kernel/transport/partitions.py): this release's online round (the month's partition detached
concurrently, then dropped, then its sessions deleted in batches, each step giving way after
LOCK_WAIT_MS) against the previous one (one transaction: the partition dropped and the month's
sessions deleted together), interleaved, on copies of one database.

    .venv/bin/python scripts/measure_retention.py [--sessions 100000] [--messages 4] [--rounds 3]
        [--table chat|webhooks]

A fresh embedded PostgreSQL (under a temporary directory) at head: `--sessions` sessions started in the
months before `chat_messages_legacy`'s end, `--messages` messages each (the month to retire), and
sessions of the month after (kept). Each run: a copy of that database, 4 writers (a message to a kept
session of their own, its row locked first, as an exchange writes), 2 readers (a kept session and a
page of its messages) and one client of a retired session (what it reads: its messages, then 404),
all timed for 1 s before the round, during it and 1 s after. Prints per run the round's duration, the
writers' and readers' longest wait and p99 while it ran, how long the month's sessions read empty (from
the first empty read to the round's end; the watched session's own window), the errors (the retired
session's apart: its NotFound is the answer), and the load average at the round's start (docs/scaling-out.md).

`--table webhooks`: `webhooks.partitions` instead, `--sessions` deliveries (an attempt each) in the month
retired; 4 fan-out writers (a delivery of the kept month each), 2 readers of the endpoint's deliveries, and a
lane holding its claim on a kept delivery for `--lane-seconds` (2) at a time, as the worker holds its batch across
a slow receiver's answer.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "server"), str(ROOT / "gen" / "python")]

from persona_service.chat.module import MODULE as CHAT  # noqa: E402
from persona_service.chat.records import NewMessage  # noqa: E402
from persona_service.chat.repository import ChatSessionRepository  # noqa: E402
from persona_service.kernel.data import migrate  # noqa: E402
from persona_service.kernel.data.embedded import postgres_url  # noqa: E402
from persona_service.kernel.data.engine import make_engine  # noqa: E402
from persona_service.kernel.data.partitions_repository import MonthlyPartitions  # noqa: E402
from persona_service.kernel.errors import NotFound  # noqa: E402
from persona_service.kernel.settings import forget  # noqa: E402
from persona_service.kernel.transport.partitions import plan_age_out  # noqa: E402
from persona_service.registry import MODULES  # noqa: E402
from persona_service.webhooks.module import MODULE as WEBHOOKS  # noqa: E402
from persona_service.webhooks.records import Subscription  # noqa: E402
from persona_service.webhooks.repository import DeliveryQueue, WebhookRepository  # noqa: E402
from sqlalchemy import Engine, make_url, text  # noqa: E402

WS, WRITERS, READERS, RETENTION_DAYS = "ws_1", 4, 2, 30
LEGACY = {"chat": "chat_messages", "webhooks": "webhook_deliveries"}  # the table whose legacy month is retired

_SEED = (
    "SET LOCAL session_replication_role = replica",  # (sessions of no organization)
    """INSERT INTO chat_sessions (id, org_id, workspace_id, persona_id, user_id, title, status, message_count,
        input_tokens, output_tokens, cost_usd_micros, started_at, last_active_at)
      SELECT 'chs_' || g, 'org_1', :ws, 'per_1', 'end-user-' || (g % 1000), '', 'active', :messages, 0, 0, 0,
             :end - make_interval(secs => g * 10), :end FROM generate_series(1, :sessions) g""",
    """INSERT INTO chat_messages (id, session_id, org_id, workspace_id, ordinal, role, content, model, input_tokens,
        output_tokens, cost_usd_micros, drift_score, recovered, created_at, session_started_at)
      SELECT 'msg_' || g || '_' || o, 'chs_' || g, 'org_1', :ws, o, CASE WHEN o % 2 = 1 THEN 'user' ELSE 'assistant' END,
             repeat('A message of ordinary length. ', 5), '', 0, 0, 0, 0, false,
             :end - make_interval(secs => g * 10 - o), :end - make_interval(secs => g * 10)
      FROM generate_series(1, :sessions) g, generate_series(1, :messages) o""",
    """INSERT INTO chat_sessions (id, org_id, workspace_id, persona_id, user_id, title, status, message_count,
        input_tokens, output_tokens, cost_usd_micros, started_at, last_active_at)
      SELECT 'chs_kept_' || g, 'org_1', :ws, 'per_1', 'end-user', '', 'active', 0, 0, 0, 0,
             :end + make_interval(hours => g), :end FROM generate_series(1, :kept) g""",
)


@dataclass
class Client:
    """One operation in a loop until stopped, each timed (start, seconds) with its errors."""

    name: str
    op: Callable[[int], object]
    timings: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def run(self, stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            started = time.monotonic()
            try:
                self.op(n)
            except Exception as exc:  # noqa: BLE001 - counted: the measurement is whether any happen
                state = getattr(getattr(exc, "orig", None), "sqlstate", None)
                self.errors.append(type(exc).__name__ + (f" {state}" if state else ""))
            self.timings.append((started, time.monotonic() - started))
            stop.wait(0.005)


def _previous_round(engine: Engine, now: datetime) -> int:
    """The previous release's round, as it was: one transaction (lock_timeout 5 s), the partition dropped and
    the sessions started before its end deleted in it."""
    with engine.begin() as conn:
        conn.execute(text("SELECT set_config('lock_timeout', '5s', true)"))
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended('chat_messages partitions', 0))"))
        partitions = MonthlyPartitions(conn, "chat_messages").partitions()
        todo = plan_age_out(partitions, now, RETENTION_DAYS)
        for start, end in todo.make:
            conn.execute(text(f"CREATE TABLE IF NOT EXISTS chat_messages_p{start:%Y%m} PARTITION OF chat_messages "
                              f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"))
        for name in todo.drop:
            upper = next(p.upper for p in partitions if p.name == name)
            conn.execute(text(f"DROP TABLE IF EXISTS {name}"))
            conn.execute(text("DELETE FROM chat_sessions WHERE started_at < :before"), {"before": upper})
    return len(todo.make) + len(todo.drop)


def _online_round(engine: Engine, now: datetime) -> int:
    """This release's round: the chat module's job (its sessions' batches by id) at `now`."""
    job = next(j for j in CHAT.jobs if j.name == "chat.partitions")
    os.environ["PERSONA_CHAT_RETENTION_DAYS"] = str(RETENTION_DAYS)
    forget()  # (settings are read once a process)
    return job.run(SimpleNamespace(engine=engine, clock=lambda: now))  # type: ignore[arg-type]


# Webhook deliveries (`--table webhooks`): `--sessions` deliveries (each with one attempt) in the months
# retired, one endpoint; a lane holding its claim on a kept delivery across a slow receiver (LANE_SECONDS), as
# the worker holds its batch across the HTTP calls; fan-out writers and readers of the endpoint's deliveries.
LANE_SECONDS = 2.0  # (--lane-seconds) a receiver that slow holds the lane's claim that long
_WEBHOOK_SEED = (
    "SET LOCAL session_replication_role = replica",  # (the endpoint's organization is not there)
    """INSERT INTO webhook_endpoints (id, org_id, workspace_id, url, description, events, enabled, secret_enc,
        secret_created_at) VALUES ('whe_1', 'org_1', :ws, 'https://example.com', '', ARRAY['*'], true, 's', now())""",
    """INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempt_count,
        last_status_code, created_at, completed_at)
      SELECT 'whd_' || g, 'whe_1', 'evt_' || g, 'persona.created', 'succeeded', 1, 200,
             :end - make_interval(secs => g * 10), :end - make_interval(secs => g * 10)
      FROM generate_series(1, :sessions) g""",
    """INSERT INTO webhook_attempts (delivery_id, attempt, attempted_at, status_code, latency_ms, response_body,
        error, success)
      SELECT 'whd_' || g, 1, :end - make_interval(secs => g * 10), 200, 20, 'ok', '', true
      FROM generate_series(1, :sessions) g""",
    """INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempt_count, next_attempt_at,
        created_at) VALUES ('whd_lane', 'whe_1', 'evt_lane', 'persona.created', 'pending', 0, :end, :end)""",
)


def _previous_webhook_round(engine: Engine, now: datetime) -> int:
    """The previous release's `webhooks.partitions`: per table one transaction (lock_timeout 5 s), its months
    made and those past the retention dropped."""
    done = 0
    for table in ("webhook_deliveries", "webhook_attempts"):
        with engine.begin() as conn:
            conn.execute(text("SELECT set_config('lock_timeout', '5s', true)"))
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": f"{table} partitions"})
            todo = plan_age_out(MonthlyPartitions(conn, table).partitions(), now, RETENTION_DAYS)
            for start, end in todo.make:
                conn.execute(text(f"CREATE TABLE IF NOT EXISTS {table}_p{start:%Y%m} PARTITION OF {table} "
                                  f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"))
            for name in todo.drop:
                conn.execute(text(f"DROP TABLE IF EXISTS {name}"))
        done += len(todo.make) + len(todo.drop)
    return done


def _online_webhook_round(engine: Engine, now: datetime) -> int:
    """This release's round: the webhooks module's job at `now`."""
    job = next(j for j in WEBHOOKS.jobs if j.name == "webhooks.partitions")
    os.environ["PERSONA_WEBHOOK_DELIVERY_RETENTION_DAYS"] = str(RETENTION_DAYS)
    forget()
    return job.run(SimpleNamespace(engine=engine, clock=lambda: now))  # type: ignore[arg-type]


def _webhook_clients(engine: Engine, end: datetime, lane_seconds: float) -> list[Client]:
    def writer(k: int) -> Callable[[int], object]:
        def op(n: int) -> None:
            with engine.begin() as conn:
                DeliveryQueue(conn).add_deliveries([f"whd_new_{k}_{n}"], [Subscription(
                    f"evt_new_{k}_{n}", "persona.created", "whe_1", end + timedelta(hours=1))], end)
        return op

    def reader(_: int) -> None:
        with engine.connect() as conn:
            WebhookRepository(conn).deliveries_page("whe_1", "", 20, None)

    def lane(_: int) -> None:  # its claim held across a slow receiver's answer
        with engine.begin() as conn:
            conn.execute(text("SELECT d.id FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id "
                              "WHERE d.id = 'whd_lane' FOR UPDATE OF d"))
            time.sleep(lane_seconds)
            conn.execute(text("UPDATE webhook_deliveries SET attempt_count = attempt_count + 1 WHERE id = 'whd_lane'"))
    return [*(Client(f"writer{k}", writer(k)) for k in range(1, WRITERS + 1)),
            *(Client(f"reader{k}", reader) for k in range(1, READERS + 1)), Client("lane", lane)]


def _seed(server: str, sessions: int, messages: int, table: str) -> tuple[str, datetime]:
    url = make_url(server).set(database="seeded").render_as_string(hide_password=False)
    admin = make_engine(server, pool_size=1)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("CREATE DATABASE seeded"))
    admin.dispose()
    migrate.upgrade(url, MODULES.migrations)
    engine = make_engine(url, pool_size=1)
    with engine.connect() as conn:
        end = next(p.upper for p in MonthlyPartitions(conn, LEGACY[table]).partitions()
                   if p.name == f"{LEGACY[table]}_legacy")
    assert end is not None
    started = time.monotonic()
    with engine.begin() as conn:
        for statement in (_SEED if table == "chat" else _WEBHOOK_SEED):
            conn.execute(text(statement), {"ws": WS, "end": end, "sessions": sessions, "messages": messages,
                                           "kept": WRITERS + READERS})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
    engine.dispose()
    what = f"{sessions} sessions, {sessions * messages} messages" if table == "chat" else \
        f"{sessions} webhook deliveries and their attempts"
    print(f"seeded {what} in {time.monotonic() - started:.1f} s", flush=True)
    return url, end.astimezone(UTC)


def _copy(server: str, name: str) -> str:
    admin = make_engine(server, pool_size=1)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(text(f"CREATE DATABASE {name} TEMPLATE seeded"))
    admin.dispose()
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def _clients(engine: Engine, end: datetime, retired: dict[str, float]) -> list[Client]:
    def writer(k: int) -> Callable[[int], object]:
        session_id = f"chs_kept_{k}"

        def op(n: int) -> None:
            with engine.begin() as conn:
                repo = ChatSessionRepository(conn)
                assert repo.lock(WS, session_id) is not None
                repo.add_messages(NewMessage(f"msg_{session_id}_{n}", session_id, "org_1", WS, n, "user", "Hello",
                                             "key", end))
        return op

    def reader(k: int) -> Callable[[int], object]:
        session_id = f"chs_kept_{WRITERS + k}"

        def op(_: int) -> None:
            with engine.connect() as conn:
                repo = ChatSessionRepository(conn)
                assert repo.get(WS, session_id) is not None
                repo.messages_page(session_id, 20, 0)
        return op

    def retired_client(_: int) -> None:  # a session of the month retired: what it reads, and its messages
        with engine.begin() as conn:
            repo = ChatSessionRepository(conn)
            if repo.lock(WS, "chs_1") is None:
                retired.setdefault("gone", time.monotonic())
                return
            if not repo.messages_page("chs_1", 20, 0):
                retired.setdefault("empty", time.monotonic())
                try:
                    repo.add_messages(NewMessage("msg_retired", "chs_1", "org_1", WS, 99, "user", "Hi", "key", end))
                except NotFound:
                    retired["refused"] = retired.get("refused", 0) + 1
                    raise
    return [*(Client(f"writer{k}", writer(k)) for k in range(1, WRITERS + 1)),
            *(Client(f"reader{k}", reader(k)) for k in range(1, READERS + 1)),
            Client("retired", retired_client)]


def _run(server: str, end: datetime, how: str, name: str, table: str,
         lane_seconds: float = LANE_SECONDS) -> dict[str, object]:
    url = _copy(server, name)
    engine = make_engine(url, pool_size=WRITERS + READERS + 3)
    job = make_engine(url, pool_size=1)
    retired: dict[str, float] = {}
    clients = _clients(engine, end, retired) if table == "chat" else _webhook_clients(engine, end, lane_seconds)
    stop = threading.Event()
    threads = [threading.Thread(target=c.run, args=(stop,)) for c in clients]
    for thread in threads:
        thread.start()
    stop.wait(1)
    load = os.getloadavg()[0]
    began = time.monotonic()
    rounds = {("chat", "online"): _online_round, ("chat", "previous"): _previous_round,
              ("webhooks", "online"): _online_webhook_round, ("webhooks", "previous"): _previous_webhook_round}
    try:
        done: object = rounds[table, how](job, end + timedelta(days=RETENTION_DAYS))
    except Exception as exc:  # noqa: BLE001 - reported: a round that did not finish (the next one goes on)
        done = f"failed: {type(exc).__name__}"
    ended = time.monotonic()
    stop.wait(1)
    stop.set()
    for thread in threads:
        thread.join()
    with engine.connect() as conn:
        left = conn.execute(text("SELECT count(*) FROM chat_sessions WHERE started_at < :end" if table == "chat" else
                                 "SELECT count(*) FROM webhook_deliveries WHERE created_at < :end"), {"end": end}).scalar()
    engine.dispose()
    job.dispose()

    def during(kind: str) -> list[float]:  # the waits of operations that overlapped the round
        return sorted(s for c in clients if c.name.startswith(kind) for t, s in c.timings
                      if t < ended and t + s > began)

    writes, reads = during("writer"), during("reader")
    return {
        "how": how, "round_s": ended - began, "partitions": done, "sessions_left": left, "load": load,
        "writes": len(writes), "write_p99_ms": writes[int(len(writes) * 0.99)] * 1000 if writes else 0,
        "write_max_ms": writes[-1] * 1000 if writes else 0,
        "reads": len(reads), "read_max_ms": reads[-1] * 1000 if reads else 0,
        # the month's sessions read empty from its detach (the first empty read) until their batch: the last by the
        # round's end; the session watched here went in whichever batch took it
        "empty_s": ended - retired.get("empty", ended),
        "watched_empty_s": retired.get("gone", ended) - retired.get("empty", retired.get("gone", ended)),
        "errors": sorted({e for c in clients if c.name not in ("retired", "lane") for e in c.errors}),
        "retired_errors": sorted({e for c in clients if c.name in ("retired", "lane") for e in c.errors}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--table", choices=sorted(LEGACY), default="chat")
    parser.add_argument("--lane-seconds", type=float, default=LANE_SECONDS)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory(prefix="retention-") as tmp:
        server = postgres_url(pathlib.Path(tmp) / "postgres")
        _, end = _seed(server, args.sessions, args.messages, args.table)
        for n in range(args.rounds):
            order = ("previous", "online") if n % 2 == 0 else ("online", "previous")
            for how in order:
                r = _run(server, end, how, f"run_{n}_{how}", args.table, args.lane_seconds)
                failed |= bool(r["errors"]) or r["sessions_left"] != 0
                empty = (f"the month's sessions read empty for {r['empty_s']:.2f} s at most (the one watched "
                         f"{r['watched_empty_s']:.2f} s; its errors: {r['retired_errors']})" if args.table == "chat"
                         else f"the lane's errors: {r['retired_errors']}")
                print(f"round {n + 1} {r['how']:8}: retired in {r['round_s']:.2f} s ({r['partitions']} partitions "
                      f"made/retired, {r['sessions_left']} old rows left); during it {r['writes']} writes "
                      f"(p99 {r['write_p99_ms']:.0f} ms, longest {r['write_max_ms']:.0f} ms), {r['reads']} reads "
                      f"(longest {r['read_max_ms']:.0f} ms); {empty}; errors {r['errors']}; load {r['load']:.2f}",
                      flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
