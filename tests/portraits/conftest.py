"""The portrait tests run twice: on the shared stack (local storage, signed
URLs served through Envoy) and on a stack whose storage is a real
S3-compatible server (presigned URLs served by the store)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest
from files.s3_server import S3Server, s3_server
from persona_service.files.local import LocalStorage
from persona_service.files.s3 import S3Storage
from persona_service.files.settings import FileSettings
from persona_service.files.storage import Storage, signing_key
from support import JWT_SECRET, Stack, TenantFactory, client_for, engine_for, make_stack, running


@dataclass
class Env:
    backend: str
    stack: Stack
    http: httpx.Client
    engine: object
    tenants: TenantFactory
    s3: S3Server | None = None

    def storage(self) -> Storage:
        """The storage the stack's servers use, opened the same way."""
        if self.s3 is None:
            return LocalStorage(self.stack.settings.data_dir / "objects", signing_key(JWT_SECRET),
                                f"http://127.0.0.1:{self.stack.settings.http_port}")
        return S3Storage(FileSettings(**{k.removeprefix("PERSONA_").lower(): v for k, v in self.s3.env().items()}))


@pytest.fixture(scope="module", params=["local", "s3"])
def env(request, stack, http, engine, tenants, tmp_path_factory):
    if request.param == "local":
        yield Env("local", stack, http, engine, tenants)
        return
    # (No webhook worker: nothing here is delivered.)
    with s3_server() as s3, running(make_stack(tmp_path_factory.mktemp("portraits-s3"), workers=0, **s3.env())) as s3_stack, \
            engine_for(s3_stack) as s3_engine, client_for(s3_stack) as client:
        yield Env("s3", s3_stack, client, s3_engine, TenantFactory(s3_engine), s3)
