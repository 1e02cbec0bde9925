"""A unit of work per RPC: one connection and one transaction, opened on
first use, committed by the request pipeline when the RPC succeeds and rolled
back when it fails. Domain services and repositories never commit."""

from __future__ import annotations

from sqlalchemy import Connection, Engine


class UnitOfWork:
    def __init__(self, engine: Engine):
        self._engine = engine
        self._conn: Connection | None = None

    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = self._engine.connect()
            self._conn.begin()
        return self._conn

    def commit(self) -> None:
        if self._conn is not None:
            self._conn.commit()

    def close(self) -> None:
        """Roll back whatever was not committed and return the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
