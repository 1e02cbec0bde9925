"""A servicer is handed, of the other modules' ports (the exporters, the erasers, their locks, the review
resolvers), only the capabilities its module declares (`Module.needs`); reading another fails, at the process's
start for a servicer that takes it when built. tests/test_architecture.py's `undeclared_needs` finds such a read
in a domain's source too."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from persona_service.kernel.ports import DeclaredHooks, Need, UndeclaredNeed
from persona_service.kernel.resources import ServicerDeps
from persona_service.kernel.settings import Settings
from persona_service.process.app import App
from persona_service.process.server import build_server
from persona_service.registry import MODULES

# Who declares what: only these three reach the other modules' ports.
DECLARED = {
    "admin": {Need.PERSONAL_DATA},
    "privacy": {Need.PERSONAL_DATA, Need.ERASERS, Need.ERASURE_LOCKS},
    "moderation": {Need.REVIEW_RESOLVERS},
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("needs"), jwt_secret="test-secret",
                        database_url="postgresql+psycopg://nobody@127.0.0.1:9/none", redis_url="redis://127.0.0.1:9/0")
    built = App(settings, MODULES, "server")  # nothing connects until asked
    yield built
    built.close()


def _held(hooks: object) -> set[Need]:
    return {need for need in Need if hasattr(hooks, need.value)}


def test_each_module_declares_what_it_is_handed() -> None:
    assert {m.name: set(m.needs) for m in MODULES.all if m.needs} == DECLARED
    assert {name: _held(hooks) for name, hooks in MODULES.declared.items() if _held(hooks)} == DECLARED


def test_a_servicer_is_handed_its_modules_needs_and_no_other(app: App) -> None:
    for module in MODULES.all:
        for binding in module.services:
            hooks = app.servicer_deps_for(binding.name).modules
            assert _held(hooks) == set(module.needs), binding.name
    privacy = app.servicer_deps_for("persona.v1.PrivacyService").modules
    assert list(privacy.erasers) == MODULES.erasers and list(privacy.erasure_locks) == MODULES.erasure_locks
    assert dict(app.servicer_deps_for("persona.v1.ModerationService").modules.review_resolvers) \
        == MODULES.review_resolvers
    assert _held(app.servicer_deps.modules) == set()  # the deps before any module's needs hold none


def test_reading_an_undeclared_need_fails_and_says_what_to_declare(app: App) -> None:
    chat = app.servicer_deps_for("persona.v1.ChatService").modules
    with pytest.raises(UndeclaredNeed, match=r"module 'chat' reads erasers without declaring it.*Need\.ERASERS"):
        chat.erasers  # noqa: B018
    with pytest.raises(UndeclaredNeed, match="review_resolvers"):
        app.servicer_deps_for("persona.v1.AdminService").modules.review_resolvers  # noqa: B018


def test_what_a_servicer_is_handed_is_read_only() -> None:
    erasers = [lambda conn, subject, now: {}]
    hooks = DeclaredHooks("planted", {Need.ERASERS: erasers})
    with pytest.raises(AttributeError, match="read-only"):
        hooks.erasers = []  # type: ignore[misc]
    with pytest.raises(AttributeError, match="read-only"):
        hooks.personal_data = []  # type: ignore[misc]
    erasers.append(lambda conn, subject, now: {})
    assert len(hooks.erasers) == 1 and isinstance(hooks.erasers, tuple)  # a copy: the list it came from changed


def _reading_erasers(servicer: Callable[[ServicerDeps], object]) -> Callable[[ServicerDeps], object]:
    """A domain's servicer planted to read the erasers when built (whether its module declares them or not)."""

    def build(deps: ServicerDeps) -> object:
        assert len(deps.modules.erasers) > 1
        return servicer(deps)

    return build


def _plant(app: App, monkeypatch: pytest.MonkeyPatch, service: str) -> None:
    planted = [replace(b, servicer=_reading_erasers(b.servicer)) if b.name == service else b
               for b in app.modules.services]
    monkeypatch.setattr(app.modules, "services", planted)  # (the registry's: put back after the test)


def test_a_servicer_reading_an_undeclared_need_fails_the_start(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: chat's servicer reads the erasers, which chat does not declare; the server does not start."""
    _plant(app, monkeypatch, "persona.v1.ChatService")
    with pytest.raises(UndeclaredNeed, match="module 'chat' reads erasers"):
        build_server(app, "127.0.0.1:0")


def test_the_same_plant_starts_where_its_module_declares_the_need(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: planted in privacy's servicer, which declares the erasers, the server is built."""
    _plant(app, monkeypatch, "persona.v1.PrivacyService")
    server, _ = build_server(app, "127.0.0.1:0")
    server.stop(None)


def test_a_job_or_task_is_handed_its_modules_needs_and_no_other(app: App) -> None:
    """Jobs and task kinds get their module's needs too (their Runtime's `modules`); the kernel's own none."""
    jobs = {job.name: module for module in MODULES.all for job in module.jobs}
    kinds = {kind.name: module for module in MODULES.all for kind in module.tasks}
    assert jobs and kinds
    assert {name: _held(app._job_runtimes[name].modules) for name in jobs} \
        == {name: set(module.needs) for name, module in jobs.items()}
    assert {name: _held(app.tasks.runtimes[name].modules) for name in kinds} \
        == {name: set(module.needs) for name, module in kinds.items()}
    assert {runtime.engine for runtime in app.tasks.runtimes.values()} == {app.stream_engine}  # tasks: its pool
    assert _held(app.runtime.modules) == set() and _held(app.tasks.runtime.modules) == set()
    assert len(app._job_runtimes["privacy.build_exports"].modules.personal_data) == len(MODULES.personal_data)
    with pytest.raises(UndeclaredNeed, match="module 'privacy' reads review_resolvers"):
        app._job_runtimes["privacy.build_exports"].modules.review_resolvers  # noqa: B018
