from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, delete, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError

from persona_service.kernel.data.base import table_of
from persona_service.kernel.data.records import field_names, record_or_none
from persona_service.kernel.data.tables import IdempotencyRecord

_records = table_of(IdempotencyRecord)


@dataclass(frozen=True, slots=True)
class StoredRequest:
    """A key's record: the request it was first used with, and its outcome
    once completed (sealed by the secret box)."""

    method: str
    request_hash: str
    state: str  # running | completed
    response: bytes | None
    error_status: int | None
    error_body: str | None
    headers: dict[str, str] | None  # the replayed response's headers (`complete`'s)
    created_at: datetime


class IdempotencyRepository:
    def __init__(self, conn: Connection):
        self.conn = conn

    def _pk(self, org_id: str, key: str) -> ColumnElement[bool]:
        return (_records.c.org_id == org_id) & (_records.c.key == key)

    def claim(self, *, org_id: str, credential_id: str, key: str, method: str, request_hash: str, now: datetime,
              locked_until: datetime, expires_at: datetime) -> bool:
        """Insert a running claim, or take over an expired record or an
        abandoned claim. True when this request now owns the key."""
        stmt = insert(_records).values(
            org_id=org_id, credential_id=credential_id, key=key, method=method, request_hash=request_hash,
            state="running", locked_until=locked_until, expires_at=expires_at,
        )
        upsert = stmt.on_conflict_do_update(
            index_elements=[_records.c.org_id, _records.c.key],
            set_={
                "credential_id": credential_id, "method": method, "request_hash": request_hash, "state": "running", "locked_until": locked_until,
                "expires_at": expires_at, "response": None, "error_status": None, "error_body": None,
                "headers": None, "frames": None, "created_at": now,
            },
            where=(_records.c.expires_at <= now) | ((_records.c.state == "running") & (_records.c.locked_until <= now)),
        ).returning(_records.c.key)
        # ON CONFLICT guards only its arbiter, (org_id, key): two first claims at once can meet on the older primary
        # key (org_id, credential_id, key) instead, and the later one raises. Tried again, the arbiter sees the
        # earlier claim (waiting for its transaction), so the answer is the one a serial order gives.
        for tries_left in (1, 0):
            try:
                with self.conn.begin_nested():
                    return self.conn.execute(upsert).first() is not None
            except IntegrityError:
                if not tries_left:
                    raise
        raise AssertionError("unreachable")

    def get(self, org_id: str, key: str) -> StoredRequest | None:
        """The key's record, without a stream's saved frames (`frames` reads them, when a replay needs them)."""
        columns = [_records.c[name] for name in field_names(StoredRequest)]
        row = self.conn.execute(select(*columns).where(self._pk(org_id, key))).mappings().first()
        return record_or_none(StoredRequest, row)

    def _of_run(self, org_id: str, key: str, run_id: str) -> ColumnElement[bool]:
        """The key's record while it names the run (its replays follow it; not a later claim of the key)."""
        return self._pk(org_id, key) & _records.c.headers.contains({"x-run-id": run_id})  # jsonb @>

    def keep_frames(self, org_id: str, key: str, run_id: str, frames: bytes) -> bool:
        """Save a keyed stream's frames (sealed) with its record once its run ended. False when the record no
        longer names the run (expired, and the key claimed again)."""
        result = self.conn.execute(update(_records).where(self._of_run(org_id, key, run_id)).values(frames=frames))
        return result.rowcount > 0

    def frames(self, org_id: str, key: str, run_id: str) -> bytes | None:
        """The frames saved for the run the key's record names (None: none saved)."""
        return self.conn.execute(select(_records.c.frames).where(self._of_run(org_id, key, run_id))).scalar()

    def complete(self, org_id: str, key: str, *, response: bytes | None = None,
                 error_status: int | None = None, error_body: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        self.conn.execute(
            update(_records)
            .where(self._pk(org_id, key))
            .values(state="completed", response=response, error_status=error_status, error_body=error_body, headers=headers)
        )

    def renew(self, claims: list[tuple[str, str]], locked_until: datetime) -> None:
        """Extend the locks of running claims (org, key) whose calls are still in flight."""
        self.conn.execute(
            update(_records)
            .where(tuple_(_records.c.org_id, _records.c.key).in_(claims),
                   _records.c.state == "running")
            .values(locked_until=locked_until)
        )

    def release(self, org_id: str, key: str) -> None:
        """Free the key (an outcome a retry may change, kernel.transport.idempotency): a retry with it runs again."""
        self.conn.execute(delete(_records).where(self._pk(org_id, key)))

    def purge_expired(self, now: datetime, batch: int = 5000) -> int:
        doomed = select(_records.c.org_id, _records.c.key).where(_records.c.expires_at <= now).limit(batch)
        result = self.conn.execute(
            delete(_records).where(
                tuple_(_records.c.org_id, _records.c.key).in_(doomed)
            )
        )
        return result.rowcount
