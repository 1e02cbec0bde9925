"""An App owns what its process opens (kernel.resources): each resource is
opened once per App, however many threads ask, closed with it, and never
shared with another App, not even one that Python places at the address
of an App that is gone (object storage was once cached by `id(app)`)."""

from __future__ import annotations

import inspect
import threading
from dataclasses import fields
from types import BuiltinMethodType, FunctionType, MethodType

import pytest
from persona_service.files.storage import PUBLIC_URL, STORAGE, storage_for
from persona_service.kernel.resources import Resource, Resources, TaskSignals, UndeclaredResource
from persona_service.kernel.settings import Settings

FunctionTypes = (FunctionType, MethodType, BuiltinMethodType)


class Owner:
    """What storage_for needs of an App: its settings and its resources."""

    def __init__(self, data_dir):
        self.settings = Settings(data_dir=data_dir, jwt_secret="test-secret")
        self.resources = Resources(self.settings, [STORAGE, PUBLIC_URL])


def test_a_resource_opens_once_per_owner_and_closes_with_it(tmp_path):
    opened, closed = [], []
    resource = Resource("test.counter", lambda settings: opened.append(settings) or len(opened), closed.append)
    first, second = Resources(Settings(data_dir=tmp_path), [resource]), Resources(Settings(data_dir=tmp_path), [resource])
    barrier = threading.Barrier(8)

    def race():
        barrier.wait()
        first.get(resource)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert first.get(resource) == 1 and second.get(resource) == 2
    first.close()
    assert closed == [1]
    assert first.get(resource) == 3  # opened anew after a close


def test_each_app_has_its_own_storage_even_at_a_reused_address(tmp_path):
    first = Owner(tmp_path / "first")
    assert storage_for(first) is storage_for(first)
    address, misses = id(first), []
    del first
    for _ in range(10000):  # the allocator hands out the freed slot once those before it are taken
        other = object.__new__(Owner)
        if id(other) == address:
            break
        misses.append(other)
    else:
        pytest.skip("Python placed no new owner at the old address")
    other.__init__(tmp_path / "other")
    assert storage_for(other).root == (tmp_path / "other" / "objects").resolve()  # type: ignore[attr-defined]


def test_servicer_deps_hold_plain_functions_not_methods_of_the_app(tmp_path):
    """A servicer cannot reach the App, its pools or its Redis client through what it is
    handed (a bound method's `__self__` would lead there)."""
    from persona_service.process.app import App
    from persona_service.registry import MODULES

    settings = Settings(data_dir=tmp_path, jwt_secret="test-secret",
                        database_url="postgresql+psycopg://nobody@127.0.0.1:9/none", redis_url="redis://127.0.0.1:9/0")
    app = App(settings, MODULES)  # nothing connects until asked
    try:
        deps = app.servicer_deps
        functions = [getattr(deps, f.name) for f in fields(deps) if isinstance(getattr(deps, f.name), FunctionTypes)
                     or inspect.ismethod(getattr(deps, f.name))]
        functions.append(deps.tasks.wake)
        assert len(functions) >= 7
        assert [f for f in functions if inspect.ismethod(f) or hasattr(f, "__self__")] == []
        assert type(deps.tasks) is TaskSignals  # its functions are plain ones too
        assert deps.draining() is False and deps.tasks.wait_until(lambda: "settled", 0.1) == "settled"
    finally:
        app.close()


def test_only_a_declared_resource_opens(tmp_path):
    """An opener is handed the process's settings: a Resource no module declares (`Module.resources`), e.g. a
    servicer's own whose opener hands them back, is refused, not opened."""
    opened = []
    declared = Resource("test.declared", lambda settings: opened.append(settings) or "ok")
    planted = Resource("test.planted", lambda settings: opened.append(settings) or settings)
    resources = Resources(Settings(data_dir=tmp_path), [declared])
    assert resources.get(declared) == "ok"
    with pytest.raises(UndeclaredResource, match="test.planted"):
        resources.get(planted)
    assert len(opened) == 1


def test_the_modules_declare_the_resources_they_open():
    from persona_service.registry import MODULES

    declared = {r.name for r in MODULES.resources}
    assert declared == {"files.storage", "files.public_url", "billing.processor", "portraits.images"}
