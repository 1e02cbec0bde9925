"""SQL of the durable task queue (kernel.transport.tasks)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Update, delete, func, insert, literal, select, text, update
from sqlalchemy.dialects.postgresql import JSONB

from persona_service.kernel.data.base import table_of
from persona_service.kernel.data.records import record_or_none
from persona_service.kernel.data.tables import Task
from persona_service.kernel.json_values import JSONObject

_tasks = table_of(Task)

# The next due task, fairly: organizations with the fewest tasks running go
# first (one tenant's burst queues behind its own work, not everyone's), then
# the oldest due. A task whose lease ran out (its process died) is due again.
# Each kind's lease is its own (a durable run's is seconds and renewed, a
# portrait render's is minutes).
_CLAIM = text("""
UPDATE tasks SET status = 'running', attempts = attempts + 1,
    lease_until = now() + make_interval(secs => (CAST(:leases AS float8[]))[array_position(CAST(:kinds AS text[]), kind)])
WHERE id = (
    SELECT t.id FROM tasks t
    WHERE t.kind = ANY(:kinds) AND t.run_after <= now()
      AND (t.status = 'queued' OR (t.status = 'running' AND t.lease_until < now()))
    ORDER BY (SELECT count(*) FROM tasks r WHERE r.org_id = t.org_id AND r.status = 'running'
                AND r.lease_until >= now()), t.run_after, t.id
    LIMIT 1 FOR UPDATE SKIP LOCKED
)
RETURNING *
""")

_RENEW = text("""
UPDATE tasks t SET lease_until = now() + make_interval(secs => :lease)
FROM unnest(CAST(:ids AS text[]), CAST(:attempts AS int[])) AS held(id, attempts)
WHERE t.id = held.id AND t.attempts = held.attempts AND t.status = 'running'
RETURNING t.id
""")
# Of the rest, those settled by that same attempt: a run whose commit went through and which is ending is not lost
# (abandoned, it would write no end). A statement of its own, so that its snapshot sees a settlement the UPDATE
# above waited for.
_SETTLED_BY = text("""
SELECT t.id FROM tasks t JOIN unnest(CAST(:ids AS text[]), CAST(:attempts AS int[])) AS held(id, attempts)
    ON t.id = held.id AND t.attempts = held.attempts
WHERE t.status NOT IN ('running', 'queued')
""")


def notify(conn: Connection, channel: str) -> None:
    """Tell processes LISTENing on `channel` (once this transaction commits; PostgreSQL folds repeats)."""
    conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: str
    kind: str
    org_id: str
    subject_id: str
    payload: JSONObject  # what its kind reads, checked there (a run: kernel.transport.runs.RunRow)
    status: str
    attempts: int
    created_at: datetime


class TaskRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def add(self, *, id: str, kind: str, org_id: str, subject_id: str, payload: JSONObject) -> None:
        self.conn.execute(insert(_tasks).values(id=id, kind=kind, org_id=org_id, subject_id=subject_id, payload=payload))

    def claim(self, leases: dict[str, float]) -> TaskRecord | None:
        """The next due task of these kinds, leased for its kind's seconds."""
        row = self.conn.execute(_CLAIM, {"kinds": list(leases), "leases": [float(v) for v in leases.values()]}).mappings().first()
        return record_or_none(TaskRecord, row)

    def _held(self, task_id: str, attempts: int) -> Update:
        """The task while the attempt that claimed it still holds it (a later claim after a lost lease owns it then)."""
        return update(_tasks).where(_tasks.c.id == task_id, _tasks.c.attempts == attempts, _tasks.c.status == "running")

    def finish(self, task_id: str, attempts: int, status: str, error: str = "", payload: JSONObject | None = None
               ) -> bool:
        """Settle the attempt (and replace the payload, if given); False when it no longer holds the task."""
        values = {"payload": payload} if payload is not None else {}
        return self.conn.execute(
            self._held(task_id, attempts)
            .values(status=status, last_error=error[:2000], finished_at=func.now(), lease_until=None, **values)
        ).rowcount == 1

    def retry(self, task_id: str, attempts: int, delay: timedelta, error: str) -> None:
        self.conn.execute(
            self._held(task_id, attempts)
            .values(status="queued", last_error=error[:2000], run_after=func.now() + delay, lease_until=None)
        )

    # --- leases held and renewed (kernel.transport.runs) ------------------------------------------

    def add_held(self, lease_seconds: float, *, id: str, kind: str, org_id: str, subject_id: str,
                 payload: JSONObject) -> None:
        """A task its creator runs at once, under its first lease (attempt 1)."""
        self.conn.execute(insert(_tasks).values(
            id=id, kind=kind, org_id=org_id, subject_id=subject_id, payload=payload, status="running", attempts=1,
            lease_until=func.now() + timedelta(seconds=lease_seconds)))

    def get(self, task_id: str) -> TaskRecord | None:
        return record_or_none(TaskRecord, self.conn.execute(select(_tasks).where(_tasks.c.id == task_id)).mappings().first())

    def renew(self, held: dict[str, int], lease_seconds: float) -> set[str]:
        """Extend the leases still held (task id -> attempt); returns their ids and those the same attempt settled."""
        if not held:
            return set()
        rows = self.conn.execute(_RENEW, {"ids": list(held), "attempts": list(held.values()), "lease": lease_seconds})
        renewed = {row[0] for row in rows}
        rest = {task_id: attempt for task_id, attempt in held.items() if task_id not in renewed}
        if not rest:
            return renewed
        settled = self.conn.execute(_SETTLED_BY, {"ids": list(rest), "attempts": list(rest.values())})
        return renewed | {row[0] for row in settled}

    def release(self, task_id: str, attempts: int) -> None:
        """Give a held task back: due at once for any process."""
        self.conn.execute(self._held(task_id, attempts).values(status="queued", lease_until=None, run_after=func.now()))

    def save_state(self, task_id: str, attempts: int, key: str, value: object) -> bool:
        """Keep `value` under `payload.state.<key>` while the attempt holds the task."""
        return self.conn.execute(
            self._held(task_id, attempts).values(payload=func.jsonb_set(
                _tasks.c.payload, ["state", key], literal(value, JSONB), True))
        ).rowcount == 1

    def purge_finished(self, before: datetime) -> int:
        return self.conn.execute(delete(_tasks).where(_tasks.c.finished_at < before)).rowcount
