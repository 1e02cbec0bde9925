"""One stack for the volume tests (a package's worth: the seed's
platform-wide rows (moderation queue, marketplace) and the statement log
must not reach the other tests' database), seeded CI-sized (seeding.SIZES)."""

from __future__ import annotations

import dataclasses
import os

import pytest
from plans import StatementLog
from seeding import SIZES, seed_volume
from support import client_for, engine_for, make_stack, running


@pytest.fixture(scope="package")
def stack(tmp_path_factory):
    if os.environ.get("DATABASE_URL"):
        pytest.skip("reads the embedded PostgreSQL's log; DATABASE_URL names another server")
    with running(make_stack(tmp_path_factory.mktemp("volume"))) as stack:
        yield stack


@pytest.fixture(scope="package")
def engine(stack):
    with engine_for(stack) as engine:
        yield engine


@pytest.fixture(scope="package")
def http(stack):
    with client_for(stack) as client:
        yield client


@pytest.fixture(scope="package")
def seeded(stack, engine) -> dict:
    return dataclasses.asdict(seed_volume.Seeder(engine, SIZES, log=lambda _line: None).run())


@pytest.fixture(scope="package")
def statement_log(stack, engine, seeded):
    log = StatementLog(stack.settings.data_dir / "postgres" / "log")
    log.enable(engine)
    yield log
    log.disable(engine)
