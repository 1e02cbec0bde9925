"""kernel.transport.convert: what servicers use to keep one JSON form per field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from google.protobuf import timestamp_pb2
from persona.v1 import chat_pb2
from persona_service.kernel.transport.convert import INT32_MAX, int32, message_json, timestamp


def test_int32_saturates_instead_of_overflowing():
    assert int32(7) == 7
    assert int32(2**40) == INT32_MAX and int32(-(2**40)) == -INT32_MAX - 1
    chat_pb2.ChatUsage(input_tokens=int32(2**40))  # a proto setter would raise on the raw value


def test_message_json_prints_whole_doubles_as_the_transcoder_does():
    usage = chat_pb2.ChatUsage(input_tokens=3, cost_usd_micros=354.0)
    assert message_json(usage) == {"inputTokens": 3, "outputTokens": 0, "costUsdMicros": 354, "unpriced": False}
    assert type(message_json(usage)["costUsdMicros"]) is int
    assert message_json(chat_pb2.ChatUsage(cost_usd_micros=0.5))["costUsdMicros"] == 0.5


@pytest.mark.parametrize("value", [
    datetime(2026, 11, 25, 13, 45, 12, 123456, tzinfo=UTC),
    datetime(2026, 11, 25, 15, 45, 12, 999999, tzinfo=timezone(timedelta(hours=2))),
    datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),  # before the epoch: nanos stay positive
    datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2026, 11, 25, 13, 45, 12, 5),  # naive: local time
])
def test_timestamp_is_what_protobuf_makes_of_the_instant(value):
    expected = timestamp_pb2.Timestamp()
    expected.FromDatetime(value.astimezone(UTC))
    assert timestamp(value) == expected
    assert timestamp(None) is None
