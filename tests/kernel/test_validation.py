"""The NUL-character check on every request (kernel/transport/validation.py):
one scan of the encoded message for a zero byte, the walk that names the
field only when there is one. tests/kernel/test_bad_input.py holds the
contract through Envoy (422 naming the field); these hold the scan to it."""

from __future__ import annotations

import pytest
from floating_fields import floating_fields
from persona.v1 import chat_pb2, personas_pb2
from persona_service.kernel.errors import ValidationFailed
from persona_service.kernel.transport import validation

INTENT = "A grumpy lighthouse keeper who loves jazz"


def test_a_request_without_a_zero_byte_is_not_walked(monkeypatch):
    def walked(*args):
        raise AssertionError("walked a message whose encoding has no zero byte")

    monkeypatch.setattr(validation, "_null_characters", walked)
    validation.validate(chat_pb2.GetChatSessionRequest(id="chs_01JH3K4M5N6P7Q8R9S0T1V2W3X"))
    validation.validate(personas_pb2.CreatePersonaRequest(intent=INTENT, metadata={"team": ["a", "b"]}))


def test_a_zero_byte_that_is_no_character_passes():
    # A number 0 in a Struct encodes as eight zero bytes: the walk finds no NUL there.
    validation.validate(personas_pb2.CreatePersonaRequest(intent=INTENT, metadata={"n": 0, "team": "x"}))


@pytest.mark.parametrize(("metadata", "path"), [({"team": ["ok", "b\x00d"]}, "metadata.team[1]"),
                                                ({"t\x00": "x"}, "metadata.t\x00")])
def test_a_nul_anywhere_is_still_named(metadata, path):
    with pytest.raises(ValidationFailed) as caught:
        validation.validate(personas_pb2.CreatePersonaRequest(intent=INTENT, metadata=metadata))
    assert [(v.path, v.code) for v in caught.value.violations] == [(path, "null_character")]


def test_a_request_without_a_non_finite_number_is_not_walked_for_one(monkeypatch):
    def walked(*args):
        raise AssertionError("walked a message whose encoding holds no non-finite double")

    monkeypatch.setattr(validation, "_non_finite", walked)
    validation.validate(personas_pb2.CreatePersonaRequest(intent=INTENT, metadata={"n": 1.5, "big": -1.7e308,
                                                                                    "tiny": 5e-324, "list": [0, 2]}))


@pytest.mark.parametrize(("metadata", "path", "said"), [({"n": float("nan")}, "metadata.n", "NaN"),
                                                        ({"a": [1, float("inf")]}, "metadata.a[1]", "Infinity"),
                                                        ({"o": {"x": float("-inf")}}, "metadata.o.x", "-Infinity")])
def test_a_non_finite_number_in_a_json_value_is_named(metadata, path, said):
    # JSON has none: only a native gRPC caller sends one, and json_format would refuse to print it (a 500).
    with pytest.raises(ValidationFailed) as caught:
        validation.validate(personas_pb2.CreatePersonaRequest(intent=INTENT, metadata=metadata))
    assert [(v.path, v.code, v.value) for v in caught.value.violations] == [(path, "type", said)]


NON_FINITE = [(float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity")]


@pytest.mark.parametrize("field", floating_fields(), ids=lambda f: f"{f.method.name}.{f.path}")
@pytest.mark.parametrize(("number", "said"), NON_FINITE, ids=[s for _, s in NON_FINITE])
def test_a_non_finite_number_in_any_double_field_is_named(field, number, said):
    # Every double/float of every request, found by reflection: proto3's JSON mapping decodes "NaN" and
    # "Infinity" into one, and NaN fails no bound (an infinity's bound violation could not be echoed as JSON).
    with pytest.raises(ValidationFailed) as caught:
        validation.validate(field.request(number))
    assert [(v.path, v.value) for v in caught.value.violations if v.code == "type"] == [(field.path, said)]
    assert not [v for v in caught.value.violations if isinstance(v.value, float)], caught.value.violations


@pytest.mark.parametrize("field", floating_fields(), ids=lambda f: f"{f.method.name}.{f.path}")
def test_a_finite_number_in_a_double_field_is_no_type_violation(field):
    try:
        validation.validate(field.request(1.0))
    except ValidationFailed as failed:
        assert not [v for v in failed.violations if v.code == "type"], failed.violations


def test_there_are_double_fields_to_hold_finite():
    # The reflection found the known ones (an empty list would pass the tests above vacuously).
    assert {"SendChatMessage.temperature", "CreateChatCompletion.top_p"} <= {
        f"{f.method.name}.{f.path}" for f in floating_fields()}
