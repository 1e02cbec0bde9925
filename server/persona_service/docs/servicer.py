from __future__ import annotations

import json
import pathlib
from functools import cache

from google.api import httpbody_pb2
from persona.v1 import docs_pb2

from persona_service.docs.reference import render
from persona_service.kernel.api import RequestContext, ServicerDeps

DOCUMENT = pathlib.Path(__file__).resolve().parents[3] / "gen" / "openapi.json"  # the checkout's gen/ (make gen)


@cache
def _document() -> bytes:
    return DOCUMENT.read_bytes()


@cache
def _reference() -> bytes:
    return render(json.loads(_document())).encode()


class DocsServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def GetOpenApiDocument(self, request: docs_pb2.GetOpenApiDocumentRequest,
                           ctx: RequestContext) -> httpbody_pb2.HttpBody:
        ctx.respond(cache_control="public, max-age=300")
        return httpbody_pb2.HttpBody(content_type="application/json", data=_document())

    def GetApiReference(self, request: docs_pb2.GetApiReferenceRequest,
                        ctx: RequestContext) -> httpbody_pb2.HttpBody:
        ctx.respond(cache_control="public, max-age=300")
        return httpbody_pb2.HttpBody(content_type="text/html; charset=utf-8", data=_reference())
