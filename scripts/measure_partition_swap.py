"""How long the previous release's writes wait while the swap (kernel/data/partition_swap.py)
partitions a table: the audit log (0032), the event log (0033), the webhook deliveries and their
attempts (0034, both tables: `--table webhook_deliveries`) or the chat messages (0035: the backfill of
their sessions' start, the new foreign key's validation, then the swap).

    .venv/bin/python scripts/measure_partition_swap.py [--table audit_events|events|webhook_deliveries|chat_messages]
        [--rows 1000000]

A fresh embedded PostgreSQL (under a temporary directory) at the revision before the table's swap
holding `--rows` rows spread over the past, then the upgrade to head while one thread inserts a row
every 5 ms as the previous release does (the audit log: no `occurred_at`, the server's now(); the
event log: its clock's now, `seq` from the identity, through 0029's triggers; a webhook delivery: the
fan-out's insert, created_at its clock's now, and an attempt of it, `--rows` of each seeded, one endpoint
of no organization; a chat message: a user's message to a session started seconds ago, its ordinal
claimed from the session's counter, `--rows` messages seeded in sessions of ten, one started every 10
s back, of no organization). Prints the upgrade's
duration and the inserts' latencies (median, p99, longest: the swap's lock) and errors
(docs/online-migrations.md).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "server"), str(ROOT / "gen" / "python")]

from persona_service.kernel.data import migrate  # noqa: E402
from persona_service.kernel.data.embedded import postgres_url  # noqa: E402
from persona_service.kernel.data.engine import make_engine  # noqa: E402
from persona_service.registry import MODULES  # noqa: E402
from sqlalchemy import Engine, text  # noqa: E402


@dataclass(frozen=True)
class Table:
    before: str  # the revision before its swap
    seed: str | tuple[str, ...]  # `:rows` rows over the past (statements of one transaction)
    insert: str | tuple[str, ...]  # what the previous release's repository sends, for `:id` (one transaction)


def _statements(sql: str | tuple[str, ...]) -> tuple[str, ...]:
    return (sql,) if isinstance(sql, str) else sql


TABLES = {
    "audit_events": Table("0031", """INSERT INTO audit_events (id, occurred_at, org_id, actor_user_id, credential_id,
        action, resource_type, resource_id, outcome, status, error_code, request_id, client_ip, details)
      SELECT 'aud_' || g, now() - make_interval(secs => g), 'org_' || (g % 50), 'usr_' || (g % 1000), 'key',
             'personas.create', 'persona', 'res-' || g, CASE WHEN g % 10 = 0 THEN 'failure' ELSE 'success' END,
             200, '', 'req-' || g, '', '{}' FROM generate_series(1, :rows) g""",
        """INSERT INTO audit_events (id, action, resource_type, resource_id, outcome, status, error_code,
        request_id, client_ip, details) VALUES (:id, 'personas.create', '', '', 'success', 200, '', 'r', '', '{}')"""),
    "events": Table("0032", """INSERT INTO events (id, org_id, workspace_id, type, occurred_at, data, dispatched_at)
      SELECT 'evt_' || g, 'org_' || (g % 50), 'ws_' || (g % 50), 'persona.created', now() - make_interval(secs => g),
             jsonb_build_object('personaId', 'per_' || g), now() FROM generate_series(1, :rows) g""",
        """INSERT INTO events (id, org_id, workspace_id, type, occurred_at, data)
        VALUES (:id, 'org_1', 'ws_1', 'persona.created', now(), '{"personaId": "per_w"}')"""),
    "webhook_deliveries": Table("0033", (
        "SET LOCAL session_replication_role = replica",  # (the endpoint's organization is not there)
        """INSERT INTO webhook_endpoints (id, org_id, workspace_id, url, description, events, enabled, secret_enc,
        secret_created_at) VALUES ('whe_1', 'org_1', 'ws_1', 'https://example.com', '', ARRAY['*'], true, 's', now())""",
        """INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempt_count,
        last_status_code, created_at, completed_at)
      SELECT 'whd_' || g, 'whe_1', 'evt_' || g, 'persona.created', 'succeeded', 1, 200, now() - make_interval(secs => g),
             now() - make_interval(secs => g) FROM generate_series(1, :rows) g""",
        """INSERT INTO webhook_attempts (delivery_id, attempt, attempted_at, status_code, latency_ms, response_body,
        error, success)
      SELECT 'whd_' || g, 1, now() - make_interval(secs => g), 200, 20, 'ok', '', true FROM generate_series(1, :rows) g""",
    ), (
        """INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempt_count, next_attempt_at,
        created_at) VALUES (:id, 'whe_1', :id, 'persona.created', 'pending', 0, now(), now()) ON CONFLICT DO NOTHING""",
        """INSERT INTO webhook_attempts (delivery_id, attempt, attempted_at, status_code, latency_ms, response_body,
        error, success) VALUES (:id, 1, now(), 200, 20, 'ok', '', true)""",
    )),
    "chat_messages": Table("0034", (
        "SET LOCAL session_replication_role = replica",  # (the sessions' organization is not there)
        """INSERT INTO chat_sessions (id, org_id, workspace_id, persona_id, user_id, title, status, message_count,
        input_tokens, output_tokens, cost_usd_micros, started_at, last_active_at)
      SELECT 'chs_' || g, 'org_1', 'ws_1', 'per_1', 'end-user-' || (g % 1000), '', 'active', 10, 0, 0, 0,
             now() - make_interval(secs => g * 10), now() FROM generate_series(1, :rows / 10 + 1) g""",
        """INSERT INTO chat_messages (id, session_id, org_id, workspace_id, ordinal, role, content, model,
        input_tokens, output_tokens, cost_usd_micros, drift_score, recovered, created_at)
      SELECT 'msg_' || g, 'chs_' || (g / 10 + 1), 'org_1', 'ws_1', g % 10 + 1,
             CASE WHEN g % 2 = 0 THEN 'user' ELSE 'assistant' END, repeat('A message of ordinary length. ', 5), '',
             0, 0, 0, 0, false, now() - make_interval(secs => (g / 10 + 1) * 10 - g % 10)
      FROM generate_series(0, :rows - 1) g""",
    ), (  # an exchange's user message, its ordinal claimed from the session's counter as that release does
        "UPDATE chat_sessions SET message_count = message_count + 1, last_active_at = now() WHERE id = 'chs_1'",
        """INSERT INTO chat_messages (id, session_id, org_id, workspace_id, ordinal, role, content, model, input_tokens,
        output_tokens, cost_usd_micros, drift_score, recovered, created_at)
      SELECT :id, id, org_id, workspace_id, message_count, 'user', 'Hello', '', 0, 0, 0, 0, false, now()
      FROM chat_sessions WHERE id = 'chs_1'""",
    )),
}


@dataclass
class Writer:
    """Inserts a row every 5 ms until stopped, timing each."""

    engine: Engine
    insert: str | tuple[str, ...]
    seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                with self.engine.begin() as conn:
                    for statement in _statements(self.insert):
                        conn.execute(text(statement), {"id": f"w{len(self.seconds)}"})
            except Exception as exc:  # noqa: BLE001 - counted: the measurement is whether any happen
                self.errors.append(type(exc).__name__)
            self.seconds.append(time.monotonic() - started)
            self.stop.wait(0.005)


def _database(directory: pathlib.Path, name: str, rows: int) -> str:
    url = postgres_url(directory / "postgres")
    migrate.upgrade(url, MODULES.migrations, TABLES[name].before)
    engine = make_engine(url, pool_size=1)
    started = time.monotonic()
    with engine.begin() as conn:
        for statement in _statements(TABLES[name].seed):
            conn.execute(text(statement), {"rows": rows})
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    engine.dispose()
    print(f"seeded {rows} {name} rows in {time.monotonic() - started:.1f} s", flush=True)
    return url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", choices=sorted(TABLES), default="audit_events")
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="partition-swap-") as tmp:
        url = _database(pathlib.Path(tmp), args.table, args.rows)
        engine = make_engine(url, pool_size=2)
        writer = Writer(engine, TABLES[args.table].insert)
        thread = threading.Thread(target=writer.run)
        thread.start()
        writer.stop.wait(1)
        started = time.monotonic()
        migrate.upgrade(url, MODULES.migrations)
        took = time.monotonic() - started
        writer.stop.wait(1)
        writer.stop.set()
        thread.join()
        engine.dispose()
    waits = sorted(writer.seconds)
    print(f"upgrade of {args.rows} {args.table} rows: {took:.1f} s; inserts meanwhile: {len(waits)}, errors: {len(writer.errors)} "
          f"{sorted(set(writer.errors))}; latency median {waits[len(waits) // 2] * 1000:.1f} ms, "
          f"p99 {waits[int(len(waits) * 0.99)] * 1000:.1f} ms, longest {waits[-1] * 1000:.1f} ms")
    return 1 if writer.errors else 0


if __name__ == "__main__":
    sys.exit(main())
