"""scripts/measure_model_cpu.py's replay: the model's own part of a request's CPU, the captured calls run again
in-process. A refusal the service answers costs the model its work and counts; anything else (a call whose
shape no longer fits the provider) ends the measurement instead of counting as a cheap model."""

from __future__ import annotations

import sys

import pytest
from support import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
from measure_model_cpu import replay  # noqa: E402  (scripts/ is not a package)


def test_a_captured_call_is_run_again_and_timed():
    total, by_op = replay([{"op": "embed", "args": {"texts": ["a line the persona says"]}}])
    assert set(by_op) == {"embed"} and total == by_op["embed"] > 0


def test_a_call_that_no_longer_fits_the_provider_ends_the_measurement():
    with pytest.raises(KeyError):  # planted: the args a changed signature would no longer find
        replay([{"op": "embed", "args": {"inputs": ["a line"]}}])
