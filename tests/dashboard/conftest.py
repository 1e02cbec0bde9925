"""Browser fixtures: Playwright driving Debian's Chromium (`make browser`
installs it; Playwright never downloads a browser here), one browser per
module and a fresh context per test, a real webhook receiver, and the folder
the screenshots go to (under pytest's tmp dir, never committed)."""

from __future__ import annotations

import os
import shutil

import pytest
from webhooks.wh_receiver import Receiver

CHROMIUM = os.environ.get("PERSONA_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
DESKTOP = {"width": 1280, "height": 900}


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium is not installed at {CHROMIUM}: run `make browser` (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser, stack):
    """A fresh browser context (its own sessionStorage) on the edge; page
    errors and console errors (a CSP violation is one) fail the test."""
    context = browser.new_context(viewport=DESKTOP, base_url=stack.http_url)
    context.set_default_timeout(15_000)
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    opened.on("console", lambda message: problems.append(f"console: {message.text}") if message.type == "error" else None)
    opened.problems = problems
    yield opened
    context.close()
    # Failed API calls the test provokes log "Failed to load resource"; anything else is a bug.
    assert [p for p in problems if "Failed to load resource" not in p] == []


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory):
    return tmp_path_factory.mktemp("dashboard-screenshots")


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    yield r
    r.close()
