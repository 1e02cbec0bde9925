"""requirements/dev.lock (issue 46): `make install` installs its pinned versions,
so an upgrade of pytest or a plugin is a commit. It must satisfy every
requirement of both pyproject files (a dependency added without `make lock`
would not be installed), pin pytest where pyproject does, and be what this
environment runs (no package drifted from its pin)."""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "dev.lock"


def _locked() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==(\S+)", line):
            pins[canonicalize_name(m[1])] = m[2]
    return pins


def _required() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    sdk = tomllib.loads((ROOT / "sdk" / "python" / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in [*project["dependencies"], *extras["dev"], *extras["bench"], *sdk["dependencies"]]]


def test_the_lock_satisfies_every_declared_requirement():
    locked = _locked()
    unmet = [f"{r} (locked: {locked.get(canonicalize_name(r.name), 'absent')})" for r in _required()
             if (r.marker is None or r.marker.evaluate())
             and not r.specifier.contains(locked.get(canonicalize_name(r.name), "0"), prereleases=True)]
    assert not unmet, f"requirements/dev.lock is out of date, run `make lock`: {unmet}"


def test_pytest_is_pinned_and_locked_at_one_version():
    pytest_requirement = next(r for r in _required() if r.name == "pytest")
    assert str(pytest_requirement.specifier).startswith("=="), pytest_requirement
    assert _locked()["pytest"] == str(pytest_requirement.specifier)[2:]


def test_the_environment_runs_the_locked_versions():
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}
    drifted = {name: (version, installed[name]) for name, version in _locked().items()
               if name in installed and installed[name] != version}
    assert not drifted, f"installed versions differ from requirements/dev.lock (locked, installed): {drifted}"
    # The test toolchain itself must be installed, not only locked.
    for name in ("pytest", "pytest-xdist", "pytest-timeout", "hypothesis", "schemathesis"):
        assert name in installed, name
