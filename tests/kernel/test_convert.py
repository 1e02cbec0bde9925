"""kernel.transport.convert: what servicers use to keep one JSON form per field."""

from __future__ import annotations

from persona.v1 import chat_pb2
from persona_service.kernel.transport.convert import INT32_MAX, int32, message_json


def test_int32_saturates_instead_of_overflowing():
    assert int32(7) == 7
    assert int32(2**40) == INT32_MAX and int32(-(2**40)) == -INT32_MAX - 1
    chat_pb2.ChatUsage(input_tokens=int32(2**40))  # a proto setter would raise on the raw value


def test_message_json_prints_whole_doubles_as_the_transcoder_does():
    usage = chat_pb2.ChatUsage(input_tokens=3, cost_usd_micros=354.0)
    assert message_json(usage) == {"inputTokens": 3, "outputTokens": 0, "costUsdMicros": 354}
    assert type(message_json(usage)["costUsdMicros"]) is int
    assert message_json(chat_pb2.ChatUsage(cost_usd_micros=0.5))["costUsdMicros"] == 0.5
