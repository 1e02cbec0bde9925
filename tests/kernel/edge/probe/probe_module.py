"""The edge probe: a module from outside the registry (PERSONA_EXTRA_MODULES)
with one RPC per response kind and error shape. PERSONA_PROBE_GEN names the
folder holding its generated code and descriptor set (built by the test)."""

from __future__ import annotations

import json
import os
import pathlib

import probe_pb2
import probe_pb2_grpc
from google.api import httpbody_pb2
from persona_service.kernel.errors import ApiError, NotFound
from persona_service.kernel.module import Module, ServiceBinding

# The smallest valid PNG (1×1, transparent).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4b10000000049454e44ae426082"
)
SCIM = "application/scim+json"


class ProbeServicer:
    """Each method is handed the request and its call's RequestContext (`ctx`), as a module's servicers are."""

    def __init__(self, deps):  # kernel.resources.ServicerDeps
        self.deps = deps

    def GetLink(self, request, ctx):
        if request.name == "missing":
            raise NotFound("link")
        return probe_pb2.Link(uri=f"https://files.example.com/{request.name}.pdf?sig=abc")

    def GetImage(self, request, ctx):
        if request.name == "missing":
            raise NotFound("image")
        ctx.respond(cache_control="private, max-age=60")
        return httpbody_pb2.HttpBody(content_type="image/png", data=PNG)

    def GetPage(self, request, ctx):
        return httpbody_pb2.HttpBody(content_type="text/html; charset=utf-8",
                                     data=b"<!doctype html><title>Probe</title><h1>Hello</h1>")

    def CreateScimUser(self, request, ctx):
        user = json.loads(request.body.data)
        if not user.get("userName"):
            raise ApiError("userName is required.", {"scimType": "invalidValue"}, code="validation_failed")
        body = {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "id": "u1", "userName": user["userName"],
                "meta": {"version": 'W/"1"', "received_content_type": request.body.content_type}}
        ctx.respond(201, location="/v1/probe/scim/Users/u1", etag='W/"1"')
        return httpbody_pb2.HttpBody(content_type=SCIM, data=json.dumps(body).encode())

    def GetScimUser(self, request, ctx):
        raise NotFound("user")

    def EditPortrait(self, request, ctx):
        if request.id == "missing":
            raise NotFound("portrait")
        if request.id == "moderated":
            raise ApiError("The instruction was refused by moderation.", {"term": "gore"}, code="moderation_blocked")
        if request.id == "upstream":
            raise ApiError("The image provider failed.", {"provider": "local"}, code="provider_error")
        return probe_pb2.EditPortraitResponse(portrait_id=request.id)


MODULE = Module(
    name="probe",
    services=(ServiceBinding("probe.v1.ProbeService", ProbeServicer, probe_pb2_grpc.add_ProbeServiceServicer_to_server),),
    lenient_query_prefixes=("/v1/probe/scim/",),
    descriptors=pathlib.Path(os.environ["PERSONA_PROBE_GEN"]) / "probe.binpb",
)
