"""The personal-data port: what a module holds about one user of one
organization, for privacy exports (DSAR). Each module that keeps personal
data declares `Module.personal_data`; the privacy module assembles the
bundle. Each table is an iterable of batches of JSON-ready dicts, read
lazily (`export_batches`): a user's million rows are never in memory at
once. Secrets (hashes, keys) are never in them.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from sqlalchemy import Connection, Executable, RowMapping

from persona_service.kernel.clock import iso
from persona_service.kernel.data import boundaries
from persona_service.kernel.data.aggregates import DECIDES_NOTHING
from persona_service.kernel.json_values import JSONObject

# Rows read from PostgreSQL, and held, at a time per table of an export.
BATCH_ROWS = 1000
# A table of the port: its rows, a batch at a time.
Batches = Iterable[list[JSONObject]]


@dataclass(frozen=True)
class Subject:
    org_id: str
    user_id: str


def export_records(rows: Iterable[RowMapping], omit: Iterable[str] = ()) -> list[JSONObject]:
    """Database rows as JSON values, without the columns named in `omit`."""
    left_out = set(omit)
    return [{str(k): _json(v) for k, v in row.items() if k not in left_out} for row in rows]


def export_batches(conn: Connection, stmt: Executable, omit: Iterable[str] = ()) -> Iterator[list[JSONObject]]:
    """The statement's rows as JSON values, BATCH_ROWS at a time, from a
    server-side cursor (`yield_per`: psycopg's named cursor). Lazy: the
    statement runs when the first batch is asked for, so a source's tables
    are read one after another, as the bundle is written. The boundary guard
    checks it here, in its owner's call: it runs later, from the privacy
    module's loop (kernel.data.boundaries.PORTS)."""
    boundaries.check_statement(conn, stmt, sys._getframe(1))
    return _batches(conn, stmt, omit)


def _batches(conn: Connection, stmt: Executable, omit: Iterable[str]) -> Iterator[list[JSONObject]]:
    # On the statement: Connection.execution_options would stream every later statement of the connection.
    # An export copies what it reads and decides nothing on it: no aggregate's root to lock (kernel.data.aggregates).
    with conn.execute(stmt.execution_options(yield_per=BATCH_ROWS, **{DECIDES_NOTHING: True})) as result:
        while batch := export_records(result.mappings().fetchmany(BATCH_ROWS), omit):
            yield batch
            del batch  # not alive while the next batch is read


boundaries.declare_port(_batches, "a module's personal data (kernel.ports.PersonalDataExport) is read in batches as "
                                  "the privacy export streams it: checked where its owner built the statement "
                                  "(export_batches), run from the exporter's loop")


def _json(value: object) -> object:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return value

