"""The volume scripts (scripts/seed_volume.py, bench_volume.py) as modules,
and the CI-sized seed: big tables several pages (of 100) deep and a full
chain; seeds in about a second."""

from __future__ import annotations

import importlib.util
import sys

from support import ROOT


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


seed_volume = _script("seed_volume")
bench_volume = _script("bench_volume")

SIZES = seed_volume.Sizes(
    orgs=10, personas=3000, chains=2, sessions=1000, messages=10_000, scim_users=2000, scim_groups=40, events=5000,
    deliveries=5000, portraits=500, audit=3000, listings=5000, reviews=2000,
)
