"""A run that cannot lose tests (issue 46): the session fails, with a message at
the end, when

- two collected items share a node id (pytest-xdist's schedulers keep work in
  dicts keyed by id, so such items collapse into one and the rest never run), or
- the number of tests that reported a result (their call, or a setup that
  failed or skipped) differs from the number collected (after `-k`/`-m`
  deselection).

A run that stops on purpose (`-x`, `--maxfail`, `pytest.exit`, Ctrl-C) is not
counted; `--collect-only` checks only the ids. Under pytest-xdist the
controller checks: the ids are what each worker reports it collected
(`pytest_xdist_node_collection_finished`), the results are the reports the
workers send; the workers themselves do not check (each runs a share).

Registered from tests/conftest.py (`pytest_plugins`); tests/test_complete_run.py
proves both guards with planted losses."""

from __future__ import annotations

import collections

import pytest

SHOWN = 10  # node ids named in a message, at most


class CompleteRun:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.collected: list[str] | None = None  # node ids, in collection order (duplicates kept)
        self.reported: collections.Counter[str] = collections.Counter()
        self.problems: list[str] = []

    # One process: the session's own items, after deselection.
    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if _is_xdist_controller(self.config):
            return
        self.collected = [item.nodeid for item in session.items]

    # pytest-xdist's controller: what a worker collected (every worker collects every test).
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        if self.collected is None:
            self.collected = list(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.reported[report.nodeid] += 1

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        collected = self.collected or []
        duplicated = {nodeid: n for nodeid, n in collections.Counter(collected).items() if n > 1}
        if duplicated:
            shown = [f"{nodeid} (x{n})" for nodeid, n in list(duplicated.items())[:SHOWN]]
            self.problems.append(
                f"{sum(duplicated.values())} collected items share {len(duplicated)} node id(s); under "
                f"pytest-xdist all but one of each would go unrun. Give each case a distinct id: "
                + ", ".join(shown) + (" ..." if len(duplicated) > SHOWN else ""))
        if not self._stopped_on_purpose(session, exitstatus):
            reported = sum(self.reported.values())
            if reported != len(collected):
                missing = [nodeid for nodeid in dict.fromkeys(collected) if nodeid not in self.reported]
                unexpected = [nodeid for nodeid in self.reported if nodeid not in set(collected)]
                message = f"{len(collected)} tests collected but {reported} reported a result"
                if missing:
                    message += f"; never reported ({len(missing)}): " + ", ".join(missing[:SHOWN])
                    message += " ..." if len(missing) > SHOWN else ""
                if unexpected:
                    message += f"; reported but not collected ({len(unexpected)}): " + ", ".join(unexpected[:SHOWN])
                self.problems.append(message)
        if self.problems and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _stopped_on_purpose(self, session: pytest.Session, exitstatus: int) -> bool:
        option = self.config.option
        return bool(
            option.collectonly or getattr(option, "setuponly", False) or getattr(option, "setupplan", False)
            or session.shouldfail or session.shouldstop
            or exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.USAGE_ERROR,
                              pytest.ExitCode.INTERNAL_ERROR))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.problems:
            terminalreporter.write_sep("=", "INCOMPLETE RUN (tests/complete_run.py)", red=True, bold=True)
            for problem in self.problems:
                terminalreporter.write_line(f"INCOMPLETE RUN: {problem}", red=True)


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _is_xdist_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("dsession")


def pytest_configure(config: pytest.Config) -> None:
    if not _is_xdist_worker(config):
        config.pluginmanager.register(CompleteRun(config), "complete_run_guard")
