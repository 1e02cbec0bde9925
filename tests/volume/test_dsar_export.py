"""The DSAR export of the seeded heaviest user (200 chat sessions, 2,000
messages, 1,500 audit events) is streamed: every table of the personal-data
port comes in batches of at most BATCH_ROWS rows, the bundle writer never
holds a batch while the next one is read, and the document is byte for
byte the one the in-memory build made (json.dumps of the whole bundle).
Every statement it runs reads only the user's rows through an index. The
peak memory at a million rows is a measurement: scripts/measure_dsar.py."""

from __future__ import annotations

import gc
import hashlib
import io
import json
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from persona_service.kernel.data import personal_data
from persona_service.kernel.data.audit_repository import audit_events
from persona_service.kernel.data.personal_data import Subject
from persona_service.kernel.data.work import Work
from persona_service.privacy.service import write_bundle
from persona_service.registry import MODULES
from plans import reads_big_table, unfit_scans

BATCH = 100


class Batch(list):
    """A batch the test can hold a weak reference to (a plain list cannot be)."""


def tracked(batches: Iterable[list[dict[str, Any]]], sizes: list[int]) -> Iterator[list[dict[str, Any]]]:
    """The port's batches, each checked dead (nobody holds it) when the next is asked for."""
    source, previous = iter(batches), None
    while True:
        gc.collect()
        assert previous is None or previous() is None, "the writer held a batch while the next was read"
        rows = next(source, None)
        if rows is None:
            return
        batch = Batch(rows)
        del rows
        sizes.append(len(batch))
        previous = weakref.ref(batch)
        yield batch
        del batch


def build(engine, subject: Subject, sources) -> bytes:
    out = io.BytesIO()
    with engine.begin() as conn:
        write_bundle(out, Work.on(conn), subject, sources)
    return out.getvalue()


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(personal_data, "BATCH_ROWS", BATCH)


@pytest.fixture
def young_heap():
    """What the session loaded before this test (hundreds of thousands of objects) out of the collector's
    view while it runs: each batch's gc.collect() then walks only what the export made (walking the whole
    heap took about half a second a batch on a busy 2-core machine, 29 s in all). Nothing is missed: a
    batch is made after the freeze, and a frozen object that held one would keep it alive (a failure)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def test_the_export_is_written_batch_by_batch(engine, seeded, small_batches, young_heap):
    sizes: dict[str, list[int]] = {}

    def watched(source):
        return lambda work, subject: {table: tracked(batches, sizes.setdefault(table, []))
                                      for table, batches in source(work, subject).items()}

    body = build(engine, Subject(seeded["org_id"], seeded["heavy_user_id"]), [watched(s) for s in MODULES.personal_data])
    counts = json.loads(body)["manifest"]["counts"]
    assert counts["chat_messages"] == 2000 and counts["chat_sessions"] == 200, counts
    assert all(0 < n <= BATCH for batches in sizes.values() for n in batches), sizes
    assert len(sizes["chat_messages"]) == 20 and len(sizes["chat_sessions"]) == 2, sizes
    assert {table: sum(batches) for table, batches in sizes.items()} == {t: counts[t] for t in sizes}


def test_the_streamed_document_is_the_one_built_in_memory(engine, seeded, small_batches):
    subject = Subject(seeded["org_id"], seeded["heavy_user_id"])
    body = build(engine, subject, MODULES.personal_data)
    streamed = json.loads(body)
    # The in-memory build it replaces: every table loaded, then one json.dumps.
    data: dict[str, list[dict[str, Any]]] = {}
    with engine.begin() as conn:
        for source in (*MODULES.personal_data, audit_events):
            data.update({table: [row for batch in batches for row in batch]
                         for table, batches in source(Work.on(conn), subject).items()})
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 1, "generatedAt": streamed["manifest"]["generatedAt"],
        "subject": {"orgId": subject.org_id, "userId": subject.user_id},
        "counts": {table: len(rows) for table, rows in sorted(data.items())},
        "sha256": hashlib.sha256(canonical).hexdigest(),
    }
    assert body == json.dumps({"manifest": manifest, "data": data}, sort_keys=True, indent=1).encode()
    messages = data["chat_messages"]
    assert [(m["session_id"], m["ordinal"]) for m in messages] == sorted((m["session_id"], m["ordinal"]) for m in messages)


def test_the_exports_statements_read_only_the_users_rows(engine, seeded, statement_log):
    start = statement_log.offset()
    build(engine, Subject(seeded["org_id"], seeded["heavy_user_id"]), MODULES.personal_data)
    statements = [s for s in statement_log.since(start) if reads_big_table(s.sql)]
    assert any("chat_messages" in s.sql for s in statements), statements
    found = {s.sql: v for s in statements if (v := unfit_scans(engine, s))}
    assert not found, "\n\n".join(f"{sql}\n  -> {'; '.join(v)}" for sql, v in found.items())
