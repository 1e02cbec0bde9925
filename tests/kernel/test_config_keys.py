"""ConfigKey's check and normalize on the JSON a caller sends (any value: they take `object`)."""

from __future__ import annotations

import pytest
from persona_service.kernel.config_keys import ConfigKey

FLAG = ConfigKey("a.flag", "boolean", False)
CHOICE = ConfigKey("a.choice", "enum", "block", allowed=("block", "auto_recover"))
SHARE = ConfigKey("a.share", "number", 0.5, minimum=0, maximum=1)
COUNT = ConfigKey("a.count", "integer", None, minimum=1, maximum=100)


@pytest.mark.parametrize(("key", "value"), [(FLAG, True), (CHOICE, "auto_recover"), (SHARE, 0), (SHARE, 1.0),
                                            (COUNT, 7), (COUNT, 7.0)])
def test_a_value_of_the_keys_type_and_range_passes(key, value):
    assert key.check(value) is None


@pytest.mark.parametrize(("key", "value", "code"), [
    (FLAG, 1, "type"), (FLAG, "true", "type"), (CHOICE, "other", "one_of"), (CHOICE, {"a": 1}, "one_of"),
    (SHARE, True, "type"), (SHARE, "0.5", "type"), (SHARE, None, "type"), (SHARE, [1], "type"), (SHARE, 1.5, "range"),
    (SHARE, float("nan"), "range"), (COUNT, 2.5, "type"), (COUNT, 0, "range"), (COUNT, 101.0, "range"),
    (COUNT, float("inf"), "type"),
    # No JSON number reaches the key as a Python int this large (they arrive as doubles); refused, not an OverflowError.
    (COUNT, 10**400, "range"),
])
def test_any_other_json_is_refused_with_what_it_breaks(key, value, code):
    violation = key.check(value)
    assert violation is not None and violation.code == code and violation.path == "value"


def test_an_integer_key_stores_a_whole_double_as_an_int():
    assert COUNT.normalize(7.0) == 7 and isinstance(COUNT.normalize(7.0), int)
    assert SHARE.normalize(1.0) == 1.0 and isinstance(SHARE.normalize(1.0), float)
    assert CHOICE.normalize("block") == "block"
