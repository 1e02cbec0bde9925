from dataclasses import dataclass

import pytest
from persona_service.kernel.data.records import record, record_or_none, records


@dataclass(frozen=True)
class Thing:
    id: str
    size: int


def test_rows_become_records_ignoring_extra_columns():
    assert record(Thing, {"id": "a", "size": 1, "extra": True}) == Thing("a", 1)
    assert records(Thing, [{"id": "a", "size": 1}, {"id": "b", "size": 2}]) == [Thing("a", 1), Thing("b", 2)]
    assert record_or_none(Thing, None) is None


def test_a_missing_column_fails_at_the_repository():
    with pytest.raises(KeyError):
        record(Thing, {"id": "a"})
    with pytest.raises(TypeError):
        record(dict, {})  # type: ignore[arg-type]


def test_a_prepared_read_refuses_columns_sqlalchemy_would_convert():
    from persona_service.kernel.data.prepared import Prepared
    from sqlalchemy import Column, MetaData, Numeric, String, Table, select

    table = Table("t", MetaData(), Column("id", String), Column("size", Numeric))
    with pytest.raises(TypeError, match="size"):
        Prepared(select(table), Thing)
