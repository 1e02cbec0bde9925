"""Integrity errors answered once, at the unit of work (kernel/data/unique.py, the translator): a foreign-key
violation is a 404 naming the resource the write referred to, as a serial order answers a write that came
after the delete of what it refers to."""

from __future__ import annotations

import pytest
from persona_service.kernel.data.unique import gone_reference
from persona_service.kernel.errors import NotFound
from sqlalchemy import exc as sa_exc
from sqlalchemy import text


def test_a_row_referring_to_a_deleted_one_is_a_404_naming_what_it_referred_to(engine):
    with engine.connect() as conn, pytest.raises(sa_exc.IntegrityError) as caught:
        conn.execute(text(
            "INSERT INTO webhook_deliveries (id, endpoint_id, event_id, event_type, status, attempt_count, "
            "next_attempt_at, created_at) VALUES ('whd_x', 'whe_gone', 'evt_x', 't', 'pending', 0, now(), now())"))
    answer = gone_reference(caught.value)
    assert isinstance(answer, NotFound)
    assert answer.message == "The webhook endpoint does not exist."


def test_other_errors_are_not_taken_for_one(engine):
    with engine.connect() as conn, pytest.raises(sa_exc.IntegrityError) as caught:
        conn.execute(text("INSERT INTO webhook_endpoints (id) VALUES (NULL)"))
    assert gone_reference(caught.value) is None
    assert gone_reference(ValueError("x")) is None
