"""Idempotency keys (spec: Errors › Idempotency).

A key belongs to the organization (as Stripe's belong to the account): any
of its credentials using the same key with the same request gets the one
execution; the request is the method, the deterministic proto serialization
of its message (JSON key order and spacing do not matter) and the caller's
workspace (a key used from two workspaces is two requests).

A write with `Idempotency-Key` first claims the key in its own short
transaction, so concurrent requests with the same key see the claim at once.
Within 24 hours:
- same key, same request → the stored outcome, marked `Idempotent-Replayed`;
- same key, different request → 409 `idempotency_conflict`,
  `details.reason` = `payload_mismatch`;
- same key while the first request still runs → 409 `idempotency_conflict`,
  `details.reason` = `in_flight`, `Retry-After: 1` (we answer at once rather
  than hold a worker thread waiting).

What is stored is exactly what the operation committed, so a retry can never
change it: a success (recorded in the operation's own unit of work, which
commits them together), or a refusal whose changes are part of its outcome
and committed with it (`ApiError.persist`: a persona flagged by its audit, a
reply blocked with its review item). Every other failure committed nothing;
its claim is released and a retry with the key runs again: the refusals
before the operation (401, 403, 422, 429), those raised inside it, which
depend on state a retry may find changed (a 409 `state_conflict` lost to a
concurrent request, a 422 on a value above a ceiling, a 404), and every 5xx.

Stored outcomes are sealed with the secret box: a create's response holds
secrets shown once (`sk_live_…`, `whsec_…`), and nothing secret may sit in
the database in plaintext.

A stream's outcome is its run (the record's `x-run-id`): its replays follow the
run's frames in Redis, kept only 10 minutes after it ends, so once a keyed run
ended its frames are saved with the record too (`keep_frames`: compressed, then
sealed), and a replay Redis can no longer answer is answered from them, for as
long as the key is kept.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import threading
import time
import zlib
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from persona_service.kernel.clock import utcnow
from persona_service.kernel.data.idempotency_repository import IdempotencyRepository
from persona_service.kernel.data.outages import read_when_back
from persona_service.kernel.errors import IdempotencyConflict, ValidationFailed, Violation
from persona_service.kernel.principal import Principal
from persona_service.kernel.secretbox import SecretBox, open_or_legacy

log = logging.getLogger(__name__)

WINDOW = timedelta(hours=24)
# A claim's lock, renewed every third of it while its call runs in this
# process: a retry takes over the claim of a call whose process died (a node
# killed) this long after its last renewal, not after the call's longest run.
LOCK = timedelta(seconds=3)
# A claim is renewed at most this long (one its call never settled is then left to lapse).
MAX_HOLD = timedelta(minutes=5)
# How long a call whose COMMIT went unanswered waits for the database to say whether it went through.
IN_DOUBT_SECONDS = 10.0
# First wait before retrying a release PostgreSQL refused (then doubling, up to 1 s).
RELEASE_RETRY_SECONDS = 0.25
# zlib's level for a stream's saved frames: its default, as small as 9 on them and 1 a few % larger
# (scripts/measure_stream_replay_cost.py: about 1.7-1.9 KB of frames compress to 0.73-0.76 KB).
FRAMES_LEVEL = 6
# How long an ended run's frames the database refused are tried again: while Redis still answers its replays
# (kernel.transport.runs.FINISHED_TTL), so none goes unanswered if the database is back by then.
KEEP_RETRY = timedelta(minutes=10)
MAX_UNSAVED = 10_000  # ended runs' frames waiting for the database, at most (about 1 KB each)
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


@dataclass(frozen=True)
class Claim:
    org_id: str
    key: str


@dataclass(frozen=True)
class _Unsaved:
    """An ended run's sealed frames not saved yet (the database refused them), until `deadline` (monotonic)."""

    claim: Claim
    run_id: str
    sealed: bytes
    deadline: float


@dataclass(frozen=True)
class Replay:
    response: bytes | None
    error_status: int | None
    error_body: str | None
    headers: dict[str, str]


def request_hash(method: str, workspace_id: str, canonical_request: bytes) -> str:
    return hashlib.sha256(method.encode() + b"\0" + workspace_id.encode() + b"\0" + canonical_request).hexdigest()


class Idempotency:
    def __init__(self, engine: Engine, box: SecretBox) -> None:
        self.engine = engine
        self.box = box
        # The claims of this process's calls in flight (when each was claimed), renewed until settled.
        self._held: dict[Claim, float] = {}
        self._held_lock = threading.Lock()
        self._renewer: threading.Thread | None = None
        # Ended runs' frames the database refused (`keep_frames`), tried again by one thread.
        self._unsaved: list[_Unsaved] = []
        self._unsaved_lock = threading.Lock()
        self._saver: threading.Thread | None = None

    def begin(self, principal: Principal, key: str, method: str, digest: str) -> tuple[Claim, Replay | None]:
        """Claim the key (replay is None) or return the stored outcome to replay."""
        if not _KEY.match(key):
            raise ValidationFailed(
                [Violation("Idempotency-Key", "format", key[:300], {"format": "1 to 255 printable ASCII characters"})]
            )
        claim = Claim(principal.org_id, key)
        for _ in range(3):
            now = utcnow()
            with self.engine.begin() as conn:
                repo = IdempotencyRepository(conn)
                claimed = repo.claim(
                    org_id=claim.org_id, credential_id=principal.credential_id, key=key, method=method,
                    request_hash=digest, now=now, locked_until=now + LOCK, expires_at=now + WINDOW,
                )
                record = None if claimed else repo.get(claim.org_id, key)
            if claimed:
                # Held (renewed) only once committed: a commit that failed (a PgBouncer restart) may still have
                # reached PostgreSQL, and renewing a claim no call settles kept its key `in_flight` for minutes.
                self._hold(claim)
                return claim, None
            if record is not None:
                break
        else:  # pragma: no cover - the record vanished three times in a row
            raise IdempotencyConflict("The idempotency key is busy; retry.", {"reason": "in_flight"})
        if record.method != method or record.request_hash != digest:
            raise IdempotencyConflict(
                "This Idempotency-Key was already used with a different request.",
                {"reason": "payload_mismatch", "idempotencyKey": key, "firstUsedAt": record.created_at.isoformat()},
            )
        if record.state == "running":
            err = IdempotencyConflict(
                "A request with this Idempotency-Key is still running; retry shortly.",
                {"reason": "in_flight", "idempotencyKey": key, "retryAfter": 1},
            )
            err.headers = {"retry-after": "1", "x-should-retry": "true"}
            raise err
        response, error_body = record.response, record.error_body
        return claim, Replay(
            open_or_legacy(self.box, response) if response is not None else None,
            record.error_status,
            open_or_legacy(self.box, error_body.encode()).decode() if error_body is not None else None,
            dict(record.headers or {}),
        )

    def complete(self, conn: Connection, claim: Claim, response: bytes, headers: dict[str, str]) -> None:
        """Record a success inside the operation's own unit of work."""
        self._let_go(claim)
        IdempotencyRepository(conn).complete(
            claim.org_id, claim.key, response=self.box.seal_bytes(response), headers=headers
        )

    def went_through(self, claim: Claim, seconds: float = IN_DOUBT_SECONDS) -> bool:
        """Whether the write holding `claim`, whose COMMIT failed with a lost connection, committed after all:
        its claim is completed only in that transaction (`complete`), so the key's record says, read once the
        database answers (within `seconds`; False if it does not). Then the call answers its success rather
        than a 503 whose retry, finding the claim released, would run the write twice."""
        answered, record = read_when_back(self.engine, lambda conn: IdempotencyRepository(conn).get(claim.org_id, claim.key),
                                          seconds)
        return answered and record is not None and record.state == "completed"

    def fail(self, claim: Claim, http_status: int, body: str, headers: dict[str, str]) -> None:
        """Record a refusal the operation committed with its changes (`ApiError.persist`)."""
        self._let_go(claim)
        with self.engine.begin() as conn:
            IdempotencyRepository(conn).complete(
                claim.org_id, claim.key, error_status=http_status,
                error_body=self.box.seal_bytes(body.encode()).decode(), headers=headers,
            )

    def release(self, claim: Claim) -> None:
        """Free the key for the client's retry (the call failed and committed nothing).
        When PostgreSQL is what failed, the release cannot be written either:
        it is retried in the background until PostgreSQL is back, so the
        retry (after its 503's Retry-After) is not refused `in_flight` for
        the claim's whole hold (measured by scripts/topology.py)."""
        self._let_go(claim)
        try:
            self._release(claim)
        except SQLAlchemyError:
            threading.Thread(target=self._release_later, args=(claim,), name="idempotency-release", daemon=True).start()

    def _release(self, claim: Claim) -> None:
        with self.engine.begin() as conn:
            IdempotencyRepository(conn).release(claim.org_id, claim.key)

    def _release_later(self, claim: Claim) -> None:
        delay, deadline = RELEASE_RETRY_SECONDS, time.monotonic() + MAX_HOLD.total_seconds()
        while time.monotonic() < deadline:
            time.sleep(delay)
            try:
                self._release(claim)
                return
            except SQLAlchemyError:
                delay = min(2 * delay, 1.0)

    def _hold(self, claim: Claim) -> None:
        with self._held_lock:
            self._held[claim] = time.monotonic()
            if self._renewer is None:
                self._renewer = threading.Thread(target=self._renew, name="idempotency-renew", daemon=True)
                self._renewer.start()

    def _let_go(self, claim: Claim) -> None:
        with self._held_lock:
            self._held.pop(claim, None)

    def _renew(self) -> None:
        """Extend the locks of the claims held, every third of LOCK (one statement for all)."""
        while True:
            time.sleep(LOCK.total_seconds() / 3)
            oldest = time.monotonic() - MAX_HOLD.total_seconds()
            with self._held_lock:
                self._held = {claim: since for claim, since in self._held.items() if since > oldest}
                claims = [(c.org_id, c.key) for c in self._held]
            if not claims:
                continue
            try:
                with self.engine.begin() as conn:
                    IdempotencyRepository(conn).renew(claims, utcnow() + LOCK)
            except SQLAlchemyError as exc:  # PostgreSQL away: the calls holding them fail too; retried
                log.warning("could not renew %d idempotency claims: %s", len(claims), type(exc).__name__)

    def keep_frames(self, claim: Claim, run_id: str, frames: bytes) -> None:
        """Save an ended keyed run's frames (`runs.pack_ended`) with its key's record, compressed and sealed. The
        database away, the save is tried again in the background while Redis still answers the run's replays
        (KEEP_RETRY); not saved by then (or this process gone), a replay once Redis forgot the run is 404."""
        # Compressed before sealing (a sealed token does not compress); the token is stored as its raw bytes, not
        # its base64 text (a quarter smaller). Compression beside secrets leaks nothing here: nobody sees the size.
        unsaved = _Unsaved(claim, run_id, base64.urlsafe_b64decode(self.box.seal_bytes(
            zlib.compress(frames, FRAMES_LEVEL))), time.monotonic() + KEEP_RETRY.total_seconds())
        try:
            self._keep(unsaved)
        except SQLAlchemyError as exc:
            log.warning("frames of run %s not saved with its idempotency key yet (%s): tried again", run_id,
                        type(exc).__name__)
            with self._unsaved_lock:
                if len(self._unsaved) < MAX_UNSAVED:
                    self._unsaved.append(unsaved)
                if self._saver is None:
                    self._saver = threading.Thread(target=self._keep_later, name="idempotency-frames", daemon=True)
                    self._saver.start()

    def _keep(self, unsaved: _Unsaved) -> None:
        with self.engine.begin() as conn:
            kept = IdempotencyRepository(conn).keep_frames(unsaved.claim.org_id, unsaved.claim.key, unsaved.run_id,
                                                           unsaved.sealed)
        if not kept:
            log.info("frames of run %s not saved: its idempotency key no longer names it", unsaved.run_id)

    def _keep_later(self) -> None:
        """Save the frames the database refused, oldest first, until it takes them (each until its deadline)."""
        delay = RELEASE_RETRY_SECONDS
        while True:
            time.sleep(delay)
            with self._unsaved_lock:
                now = time.monotonic()
                for dropped in (u for u in self._unsaved if u.deadline <= now):
                    log.warning("frames of run %s not saved with its idempotency key: its replays end with Redis's"
                                " copy", dropped.run_id)
                self._unsaved = [u for u in self._unsaved if u.deadline > now]
                waiting = list(self._unsaved)
            try:
                for unsaved in waiting:
                    self._keep(unsaved)
                    with self._unsaved_lock:
                        self._unsaved.remove(unsaved)
                delay = RELEASE_RETRY_SECONDS
            except Exception:  # noqa: BLE001 - the database still away (each is given up at its deadline)
                delay = min(2 * delay, 5.0)

    def kept_frames(self, claim: Claim, run_id: str) -> bytes | None:
        """The frames saved for the run the key's record names (`keep_frames`), None when none were."""
        with self.engine.connect() as conn:
            sealed = IdempotencyRepository(conn).frames(claim.org_id, claim.key, run_id)
        if sealed is None:
            return None
        return zlib.decompress(self.box.open_bytes(base64.urlsafe_b64encode(sealed)))

    def purge_expired(self) -> int:
        with self.engine.begin() as conn:
            return IdempotencyRepository(conn).purge_expired(utcnow())
