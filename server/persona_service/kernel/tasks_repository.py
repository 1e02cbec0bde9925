"""SQL of the durable task queue (kernel.tasks)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, func, insert, text, update

from persona_service.kernel.db.base import table_of
from persona_service.kernel.db.records import record_or_none
from persona_service.kernel.db.tables import Task

_tasks = table_of(Task)

# The next due task, fairly: organizations with the fewest tasks running go
# first (one tenant's burst queues behind its own work, not everyone's), then
# the oldest due. A task whose lease ran out (its process died) is due again.
_CLAIM = text("""
UPDATE tasks SET status = 'running', attempts = attempts + 1, lease_until = now() + make_interval(secs => :lease)
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


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: str
    kind: str
    org_id: str
    subject_id: str
    payload: Any
    status: str
    attempts: int
    created_at: datetime


class TaskRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def add(self, **values) -> None:
        self.conn.execute(insert(_tasks).values(**values))

    def claim(self, kinds: list[str], lease_seconds: float) -> TaskRecord | None:
        row = self.conn.execute(_CLAIM, {"kinds": kinds, "lease": lease_seconds}).mappings().first()
        return record_or_none(TaskRecord, row)

    def finish(self, task_id: str, attempts: int, status: str, error: str = "") -> None:
        """Settle the attempt that claimed it (a later claim after a lost lease owns it then)."""
        self.conn.execute(
            update(_tasks).where(_tasks.c.id == task_id, _tasks.c.attempts == attempts)
            .values(status=status, last_error=error[:2000], finished_at=func.now(), lease_until=None)
        )

    def retry(self, task_id: str, attempts: int, delay: timedelta, error: str) -> None:
        self.conn.execute(
            update(_tasks).where(_tasks.c.id == task_id, _tasks.c.attempts == attempts)
            .values(status="queued", last_error=error[:2000], run_after=func.now() + delay, lease_until=None)
        )

    def purge_finished(self, before: datetime) -> int:
        return self.conn.execute(delete(_tasks).where(_tasks.c.finished_at < before)).rowcount
