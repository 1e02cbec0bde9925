"""The guards of tests/complete_run.py, proven by planted losses: tiny suites
run by pytester (in-process, and with two pytest-xdist workers) in which two
items share an id, or one test is silently dropped, must fail with a message
that names the problem; clean, stopped (`-x`), deselected (`-k`) and
collect-only runs must not. No stack starts here."""

from __future__ import annotations

import pathlib

import pytest

pytest_plugins = ["pytester"]

PLUGIN = (pathlib.Path(__file__).parent / "complete_run.py").read_text()

SUITE = """
import pytest

@pytest.mark.parametrize("n", [1, 2, 3])
def test_case(n):
    pass

def test_other():
    pass

def test_dropped():
    pass
"""

# The schemathesis failure under pytest 9.2 (issue 46): a plugin makes the cases of one test as
# items of one name, so they share one id.
SAME_IDS = """
import functools
import pytest

def pytest_pycollect_makeitem(collector, name, obj):
    if name == "test_case":
        return [pytest.Function.from_parent(collector, name=name, callobj=functools.partial(obj, n=n))
                for n in (1, 2, 3)]
"""

# A test that is never run and never reported (as a plugin or scheduler that swallows it would do).
DROP_ONE = """
def pytest_runtest_protocol(item, nextitem):
    if item.name == "test_dropped":
        return True
"""


def planted(pytester: pytest.Pytester, conftest: str = "", suite: str = SUITE) -> pytest.Pytester:
    # A copy of the plugin beside the planted conftest, so pytest-xdist's workers import it too.
    pytester.makepyfile(complete_run=PLUGIN, test_planted=suite)
    pytester.makeconftest('pytest_plugins = ["complete_run"]\n' + conftest)
    return pytester


@pytest.fixture(autouse=True)
def only_the_plugins_needed(monkeypatch):
    # Not every installed plugin (schemathesis, hypothesis...) in each planted run and each xdist worker: seconds each.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "xdist", *args)


def incomplete(result: pytest.RunResult) -> str:
    return "\n".join(line for line in result.outlines if "INCOMPLETE RUN" in line)


def test_a_clean_suite_passes(pytester):
    result = run(planted(pytester))
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=5)
    assert not incomplete(result)


def test_duplicated_ids_fail_the_run(pytester):
    result = run(planted(pytester, SAME_IDS))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=5)  # every test passed, and still the run fails
    assert "3 collected items share 1 node id(s)" in incomplete(result)
    assert "test_planted.py::test_case (x3)" in incomplete(result)


def test_duplicated_ids_fail_a_collect_only_run(pytester):
    result = run(planted(pytester, SAME_IDS), "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "share 1 node id(s)" in incomplete(result)


def test_a_silently_dropped_test_fails_the_run(pytester):
    result = run(planted(pytester, DROP_ONE))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=4)
    assert "5 tests collected but 4 reported a result" in incomplete(result)
    assert "never reported (1): test_planted.py::test_dropped" in incomplete(result)


def test_a_stopped_run_is_not_incomplete(pytester):
    suite = SUITE.replace("def test_other():\n    pass", "def test_other():\n    assert False")
    result = run(planted(pytester, suite=suite), "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3, failed=1)
    assert not incomplete(result)


def test_deselected_tests_are_not_missing(pytester):
    result = run(planted(pytester), "-k", "not dropped")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4, deselected=1)
    assert not incomplete(result)


def test_skips_and_setup_errors_count_as_reported(pytester):
    suite = SUITE + """
@pytest.fixture
def broken():
    raise RuntimeError("setup fails")

def test_setup_error(broken):
    pass

@pytest.mark.skip(reason="planted")
def test_skipped():
    pass
"""
    result = run(planted(pytester, suite=suite))
    result.assert_outcomes(passed=5, errors=1, skipped=1)
    assert not incomplete(result)


# Under pytest-xdist (two workers): the controller compares what the workers collected with the reports it received.

def test_xdist_clean_suite_passes(pytester):
    result = run(planted(pytester), "-n", "2", "--dist", "loadscope")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=5)
    assert not incomplete(result)


def test_xdist_duplicated_ids_lose_tests_and_fail(pytester):
    result = run(planted(pytester, SAME_IDS), "-n", "2", "--dist", "loadscope")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "3 collected items share 1 node id(s)" in incomplete(result)
    # loadscope keeps one of the three cases: the loss the issue found.
    assert "5 tests collected but 3 reported a result" in incomplete(result)


def test_xdist_silently_dropped_test_fails_the_run(pytester):
    result = run(planted(pytester, DROP_ONE), "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "never reported (1): test_planted.py::test_dropped" in incomplete(result)


def test_xdist_stopped_run_is_not_incomplete(pytester):
    suite = SUITE.replace("def test_other():\n    pass", "def test_other():\n    assert False")
    result = run(planted(pytester, suite=suite), "-n", "2", "-x")
    assert result.ret != 0
    assert not incomplete(result), result.stdout.str()
