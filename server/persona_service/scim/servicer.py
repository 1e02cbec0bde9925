"""SCIM over gRPC: bodies in and out as `application/scim+json` HttpBody,
ETag / Location / status through the request context, If-Match from the
request metadata. Every write broadcasts `org:<id>` after its commit, so a
deactivated or regranted member's cached credentials go at once."""

from __future__ import annotations

import json

from google.api import httpbody_pb2
from persona.v1 import scim_pb2

from persona_service.files.api import public_url
from persona_service.kernel.api import (
    ApiError,
    NotFound,
    RequestContext,
    ServicerDeps,
    hash_secret,
    nullable_time,
    page_limit,
    timestamp,
)
from persona_service.orgs.api import ApiKeyRecord, ScimTokens
from persona_service.scim.documents import parse_json
from persona_service.scim.errors import SCIM_MEDIA_TYPE
from persona_service.scim.schemas import (
    RESOURCE_TYPES,
    list_response,
    resource_type_document,
    schema_document,
    schemas,
    service_provider_config,
)
from persona_service.scim.service import Query, Rendered, Resources, not_supported, resources_for

BASE_PATH = "/v1/auth/scim/v2"
_JSON_TYPES = (SCIM_MEDIA_TYPE, "application/json")


def _body(payload: dict[str, object]) -> httpbody_pb2.HttpBody:
    return httpbody_pb2.HttpBody(content_type=SCIM_MEDIA_TYPE, data=json.dumps(payload).encode())


def _sent(body: httpbody_pb2.HttpBody) -> bytes:
    media = body.content_type.split(";")[0].strip().lower()
    if body.data and media not in _JSON_TYPES:
        raise ApiError(f"Send {SCIM_MEDIA_TYPE} (or application/json), not {media or 'no content type'}.",
                       {"scimType": "invalidSyntax"}, code="unsupported_media_type")
    return bytes(body.data)


class ScimServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def _base(self) -> str:
        return public_url(self.deps) + BASE_PATH

    def _resources(self, kind: str, ctx: RequestContext) -> Resources:
        return resources_for(kind, ctx.work, ctx.caller.org_id, self._base(), self.deps.hints)

    @staticmethod
    def _answer(rendered: Rendered, ctx: RequestContext, created: bool = False) -> httpbody_pb2.HttpBody:
        ctx.respond(etag=rendered.etag)
        if created:
            ctx.respond(location=rendered.location)
        return _body(rendered.body)

    def _changed(self, ctx: RequestContext) -> None:
        org_id = ctx.caller.org_id
        ctx.after_commit.append(lambda: self.deps.invalidate(f"org:{org_id}"))

    @staticmethod
    def _if_match(ctx: RequestContext) -> str | None:
        return ctx.metadata.get("if-match")

    # --- discovery ----------------------------------------------------------------------

    def GetServiceProviderConfig(self, request: scim_pb2.GetServiceProviderConfigRequest,
                                 ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return _body(service_provider_config(self._base()))

    def ListResourceTypes(self, request: scim_pb2.ListResourceTypesRequest,
                          ctx: RequestContext) -> httpbody_pb2.HttpBody:
        types = [resource_type_document(rt, self._base()) for rt in RESOURCE_TYPES.values()]
        return _body(list_response(types, len(types)))

    def GetResourceType(self, request: scim_pb2.GetResourceTypeRequest,
                        ctx: RequestContext) -> httpbody_pb2.HttpBody:
        rt = RESOURCE_TYPES.get(request.id)
        if rt is None:
            raise NotFound("resource type")
        return _body(resource_type_document(rt, self._base()))

    def ListSchemas(self, request: scim_pb2.ListSchemasRequest, ctx: RequestContext) -> httpbody_pb2.HttpBody:
        documents = [schema_document(s, self._base()) for s in schemas().values()]
        return _body(list_response(documents, len(documents)))

    def GetSchema(self, request: scim_pb2.GetSchemaRequest, ctx: RequestContext) -> httpbody_pb2.HttpBody:
        schema = schemas().get(request.id)
        if schema is None:
            raise NotFound("schema")
        return _body(schema_document(schema, self._base()))

    # --- Users and Groups -------------------------------------------------------------------

    def _create(self, kind: str, request: scim_pb2.CreateScimUserRequest | scim_pb2.CreateScimGroupRequest,
                ctx: RequestContext) -> httpbody_pb2.HttpBody:
        rendered = self._resources(kind, ctx).create(_sent(request.body))
        self._changed(ctx)
        return self._answer(rendered, ctx, created=True)

    def _get(self, kind: str, request: scim_pb2.GetScimUserRequest | scim_pb2.GetScimGroupRequest,
             ctx: RequestContext) -> httpbody_pb2.HttpBody:
        found = self._resources(kind, ctx).get(request.id, request.attributes, request.excluded_attributes)
        return self._answer(found, ctx)

    def _list(self, kind: str, request: scim_pb2.ListScimUsersRequest | scim_pb2.ListScimGroupsRequest,
              ctx: RequestContext) -> httpbody_pb2.HttpBody:
        query = Query(request.filter, request.start_index if request.HasField("start_index") else 1,
                      request.count if request.HasField("count") else Query.count, request.attributes,
                      request.excluded_attributes, request.sort_by, request.sort_order)
        return _body(self._resources(kind, ctx).find(query))

    def _search(self, kind: str, request: scim_pb2.SearchScimUsersRequest | scim_pb2.SearchScimGroupsRequest,
                ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return _body(self._resources(kind, ctx).find(Query.from_search(parse_json(_sent(request.body)))))

    def _replace(self, kind: str, request: scim_pb2.ReplaceScimUserRequest | scim_pb2.ReplaceScimGroupRequest,
                 ctx: RequestContext) -> httpbody_pb2.HttpBody:
        rendered = self._resources(kind, ctx).replace(request.id, _sent(request.body), self._if_match(ctx))
        self._changed(ctx)
        return self._answer(rendered, ctx)

    def _patch(self, kind: str, request: scim_pb2.PatchScimUserRequest | scim_pb2.PatchScimGroupRequest,
               ctx: RequestContext) -> httpbody_pb2.HttpBody:
        rendered = self._resources(kind, ctx).patch(request.id, _sent(request.body), self._if_match(ctx))
        self._changed(ctx)
        return self._answer(rendered, ctx)

    def _delete(self, kind: str, request: scim_pb2.DeleteScimUserRequest | scim_pb2.DeleteScimGroupRequest,
                ctx: RequestContext) -> httpbody_pb2.HttpBody:
        self._resources(kind, ctx).delete(request.id, self._if_match(ctx))
        self._changed(ctx)
        return httpbody_pb2.HttpBody(content_type=SCIM_MEDIA_TYPE)

    def CreateScimUser(self, request: scim_pb2.CreateScimUserRequest,
                       ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._create("User", request, ctx)

    def GetScimUser(self, request: scim_pb2.GetScimUserRequest, ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._get("User", request, ctx)

    def ListScimUsers(self, request: scim_pb2.ListScimUsersRequest,
                      ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._list("User", request, ctx)

    def SearchScimUsers(self, request: scim_pb2.SearchScimUsersRequest,
                        ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._search("User", request, ctx)

    def ReplaceScimUser(self, request: scim_pb2.ReplaceScimUserRequest,
                        ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._replace("User", request, ctx)

    def PatchScimUser(self, request: scim_pb2.PatchScimUserRequest,
                      ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._patch("User", request, ctx)

    def DeleteScimUser(self, request: scim_pb2.DeleteScimUserRequest,
                       ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._delete("User", request, ctx)

    def CreateScimGroup(self, request: scim_pb2.CreateScimGroupRequest,
                        ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._create("Group", request, ctx)

    def GetScimGroup(self, request: scim_pb2.GetScimGroupRequest,
                     ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._get("Group", request, ctx)

    def ListScimGroups(self, request: scim_pb2.ListScimGroupsRequest,
                       ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._list("Group", request, ctx)

    def SearchScimGroups(self, request: scim_pb2.SearchScimGroupsRequest,
                         ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._search("Group", request, ctx)

    def ReplaceScimGroup(self, request: scim_pb2.ReplaceScimGroupRequest,
                         ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._replace("Group", request, ctx)

    def PatchScimGroup(self, request: scim_pb2.PatchScimGroupRequest,
                       ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._patch("Group", request, ctx)

    def DeleteScimGroup(self, request: scim_pb2.DeleteScimGroupRequest,
                        ctx: RequestContext) -> httpbody_pb2.HttpBody:
        return self._delete("Group", request, ctx)

    def RejectDiscoveryWrite(self, request: scim_pb2.RejectDiscoveryWriteRequest,
                             ctx: RequestContext) -> httpbody_pb2.HttpBody:
        err = ApiError(code="method_not_allowed")
        err.headers["allow"] = "GET"
        raise err

    def SearchScimResources(self, request: scim_pb2.SearchScimResourcesRequest,
                            ctx: RequestContext) -> httpbody_pb2.HttpBody:
        raise not_supported()


def scim_token(row: ApiKeyRecord) -> scim_pb2.ScimToken:
    return scim_pb2.ScimToken(id=row.id, name=row.name, prefix=row.prefix, created_at=timestamp(row.created_at),
                              revoked_at=nullable_time(row.revoked_at))


class ScimTokenServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def CreateScimToken(self, request: scim_pb2.CreateScimTokenRequest,
                        ctx: RequestContext) -> scim_pb2.CreateScimTokenResponse:
        row, secret = ScimTokens(ctx.work).create(ctx.caller, request.name)
        ctx.after_commit.append(lambda: self.deps.invalidate("cred:key:" + hash_secret(secret)))  # as a new API key
        return scim_pb2.CreateScimTokenResponse(token=scim_token(row), secret=secret)

    def ListScimTokens(self, request: scim_pb2.ListScimTokensRequest,
                       ctx: RequestContext) -> scim_pb2.ListScimTokensResponse:
        rows, cursor = ScimTokens(ctx.work, self.deps.cursors).list(ctx.caller, page_limit(request), request.cursor)
        return scim_pb2.ListScimTokensResponse(items=[scim_token(r) for r in rows], next_cursor=cursor)

    def RevokeScimToken(self, request: scim_pb2.RevokeScimTokenRequest,
                        ctx: RequestContext) -> scim_pb2.ScimToken:
        row, secret_hash = ScimTokens(ctx.work).revoke(ctx.caller, request.id)
        if secret_hash is not None:
            ctx.after_commit.append(lambda: self.deps.invalidate("cred:key:" + secret_hash))
        return scim_token(row)
