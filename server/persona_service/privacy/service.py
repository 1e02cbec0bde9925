"""Privacy exports (DSAR): requested by users, built into one JSON bundle
of what every module holds about them (Module.personal_data), stored
through the storage port. The bundle is streamed: rows come from
PostgreSQL a batch at a time and are written to a spooled file as they
come, and the storage copies that file in chunks. Services never commit:
the module's job builds each pending export in a transaction of its own,
the admin build-one RPC in its unit of work; a builder that dies rolls its
claim back."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import IO

from persona_service.files.api import SignedUrl, Storage, object_key
from persona_service.kernel.api import (
    Batches,
    CursorCodec,
    PersonalDataEraser,
    PersonalDataLock,
    Principal,
    StateConflict,
    Subject,
    Unauthorized,
    Work,
    audit_events,
    iso,
    keyset_page,
    new_id,
    utcnow,
)
from persona_service.orgs.api import OrgDirectory
from persona_service.privacy.records import Erasure, ExportRecord
from persona_service.privacy.repository import PrivacyRepository

log = logging.getLogger("persona_service.privacy")
SCHEMA_VERSION = 1
LEASE_SECONDS = 300.0
# The bundle is built in memory up to this size, then in a temporary file.
SPOOL_BYTES = 4 * 2**20
# How many times a bundle is read at most, waiting for two reads in a row to agree (`stable_bundle`).
STABLE_READS = 5
PersonalData = Callable[[Work, Subject], Mapping[str, Batches]]


# A person whose erasure committed while their call waited: the answer their key gets from then on.
_NO_LONGER = "The caller is no longer a member of the organization: their data was erased."


class PrivacyService:
    def __init__(self, work: Work, *, cursors: CursorCodec | None = None) -> None:
        self.work = work
        self._repo = work.of(PrivacyRepository)
        self.cursors = cursors

    def request(self, principal: Principal) -> ExportRecord:
        """A new pending export, or the user's export already pending or running. The caller's membership is held
        first (kernel.transport.stages.hold; their erasure locks it to end it): an export requested as the person
        is erased is made before the erasure, which deletes it, or refused after it, as a later call would be."""
        return self._repo.request(new_id("privacy_export"), principal.org_id, principal.user_id)

    def build(self, storage: Storage, sources: Sequence[PersonalData], ttl_seconds: int) -> ExportRecord | None:
        """Claim the oldest pending export (skipping those another builder
        holds; a lapsed lease counts as pending), build and store its bundle,
        in this unit of work: the export, or None when nothing was pending.
        A build that fails settles the export `failed` (with the error), so
        it never holds up the exports behind it."""
        job = self._repo.claim(LEASE_SECONDS)
        if job is None:
            return None
        try:
            with self.work.savepoint(), tempfile.SpooledTemporaryFile(SPOOL_BYTES) as body:
                digest = stable_bundle(body, self.work, Subject(job.org_id, job.user_id), sources)
                body.seek(0)
                key = object_key(job.org_id, "privacy", f"{job.id}.json")
                storage.put_file(key, body, "application/json")  # rewritten, never orphaned, if this rolls back
                self._repo.complete(job.id, key, digest, utcnow() + timedelta(seconds=ttl_seconds))
        except Exception as exc:  # noqa: BLE001 - recorded on the export
            log.exception("privacy export %s failed", job.id)
            self._repo.fail(job.id, f"{type(exc).__name__}: {exc}")
        return job

    def erase(self, principal: Principal, erasers: Sequence[PersonalDataEraser], locks: Sequence[PersonalDataLock],
              storage: Storage) -> Erasure:
        """Right to erasure (see the proto): every module erases its part; this
        module its own exports. The person is erased wherever a link made them
        known after this organization (OrgDirectory.linked_later), so no link
        keeps their record alive. The owner of an organization is refused."""
        directory = OrgDirectory(self.work)
        # In each organization, what other writes lock before a membership (`erasure_locks`: SCIM groups, then the
        # user), then the person's membership, which the erasure ends: a second erasure at once waits and is
        # refused as a call after the first would be (its key revoked), and an export requested meanwhile
        # (`request`) waits or is erased with the rest.
        self._lock(locks, principal.org_id, principal.user_id)
        if principal.org_id not in directory.end_members([principal.org_id], principal.user_id):
            raise Unauthorized(_NO_LONGER)
        org_ids = [principal.org_id, *directory.linked_later(principal.org_id, principal.user_id)]
        for org_id in sorted(org_ids[1:]):
            self._lock(locks, org_id, principal.user_id)
        directory.end_members(org_ids[1:], principal.user_id)
        for org_id in org_ids:
            org = directory.get(org_id)
            if org is not None and org.owner_user_id == principal.user_id:
                raise StateConflict("The organization's owner cannot erase their data; transfer ownership first.",
                                    "owner", {"userId": principal.user_id})
        now, counts = utcnow(), Counter[str]()
        for org_id in org_ids:
            subject = Subject(org_id, principal.user_id)
            own = erase_exports not in erasers  # (hooks without this module's: its part goes last)
            for erase in [*erasers, *([erase_exports] if own else [])]:  # in the lock order (Modules.erasers)
                if erase is erase_exports:  # this module's part, at its place in that order: its stored files too
                    exports = self._repo.delete_for(org_id, principal.user_id)
                    for key in filter(None, exports):
                        storage.delete(key)
                    counts.update(privacy_exports_deleted=len(exports))
                else:
                    counts.update(erase(self.work, subject, now))
        return Erasure(dict(counts), tuple(org_ids))

    def _lock(self, locks: Sequence[PersonalDataLock], org_id: str, user_id: str) -> None:
        for lock in locks:
            lock(self.work, Subject(org_id, user_id))

    def list(self, principal: Principal, cursor: str, limit: int) -> tuple[list[ExportRecord], str]:
        return keyset_page(
            self.cursors, f"privacy-exports:{principal.org_id}:{principal.user_id}", limit, cursor,
            lambda n, after: self._repo.page(principal.org_id, principal.user_id, n, after), "created_at",
        )


def erase_exports(work: Work, subject: Subject, now: datetime) -> dict[str, int]:
    """This module's eraser: the person's exports (`PrivacyService.erase` runs it in its place with their files)."""
    return {"privacy_exports_deleted": len(work.of(PrivacyRepository).delete_for(subject.org_id, subject.user_id))}


def status_of(row: ExportRecord, now: datetime) -> str:
    if row.status == "completed" and row.expires_at is not None and row.expires_at <= now:
        return "expired"
    return row.status


def download_of(row: ExportRecord, storage: Storage, now: datetime) -> SignedUrl | None:
    if status_of(row, now) != "completed" or row.expires_at is None:
        return None
    return storage.signed_url(row.storage_key, max(1, int((row.expires_at - now).total_seconds())))


def stable_bundle(out: IO[bytes], work: Work, subject: Subject, sources: Sequence[PersonalData]) -> str:
    """`write_bundle` read again until two reads in a row agree (its digest). Each statement of a read sees what had
    committed when it began, so a write of the subject's data that commits midway is half in one read (its audit
    event missed, the persona it renamed already renamed): no serial order gives that bundle, and the oracle found
    one (tests/privacy/test_dsar_build_serial_oracle_http.py). Two equal reads are the data as it was when the
    second began: a write that committed during it changed nothing it read after."""
    digest = ""
    for _ in range(STABLE_READS):
        out.seek(0)
        out.truncate()
        again = write_bundle(out, work, subject, sources)
        if again == digest:
            break
        digest = again
    else:
        log.warning("privacy export of %s/%s kept changing while read: built from the last read",
                    subject.org_id, subject.user_id)
    return digest


def write_bundle(out: IO[bytes], work: Work, subject: Subject, sources: Sequence[PersonalData]) -> str:
    """Write the JSON bundle to `out` and return the SHA-256 of its `data`:
    `manifest` (schema version, generated at, subject, counts per table,
    SHA-256 of `data` as canonical JSON) and `data`, byte for byte what
    `json.dumps(bundle, sort_keys=True, indent=1)` gives. Streamed: table
    by table in name order, one batch of rows held at a time; `data` sorts
    before `manifest`, so the manifest, counts and digest known, comes last."""
    tables: dict[str, Batches] = {}
    for source in (*sources, audit_events):
        tables.update(source(work, subject))
    digest, counts = hashlib.sha256(b"{"), {}
    out.write(b'{\n "data": {')
    for t, table in enumerate(sorted(tables)):
        name = json.dumps(table).encode()
        out.write(b"," * bool(t) + b"\n  " + name + b": [")
        digest.update(b"," * bool(t) + name + b":[")
        n = 0
        for batch in tables[table]:
            for row in batch:
                out.write(b"," * bool(n) + b"\n   " + _indented(row, 3))
                digest.update(b"," * bool(n) + json.dumps(row, sort_keys=True, separators=(",", ":")).encode())
                n += 1
            del batch  # not alive while the next batch is read
        out.write(b"\n  ]" if n else b"]")
        digest.update(b"]")
        counts[table] = n
    digest.update(b"}")
    manifest = {
        "schemaVersion": SCHEMA_VERSION, "generatedAt": iso(utcnow()),
        "subject": {"orgId": subject.org_id, "userId": subject.user_id}, "counts": counts,
        "sha256": digest.hexdigest(),
    }
    out.write(b'\n },\n "manifest": ' + _indented(manifest, 1) + b"\n}")
    return digest.hexdigest()


def _indented(value: object, depth: int) -> bytes:
    """`value` as json.dumps(indent=1) writes it `depth` levels down (its strings hold no raw newline)."""
    return json.dumps(value, sort_keys=True, indent=1).replace("\n", "\n" + " " * depth).encode()
