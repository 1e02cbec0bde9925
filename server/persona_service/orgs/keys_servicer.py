from persona.v1 import keys_pb2

from persona_service.kernel.api import (
    RequestContext,
    ServicerDeps,
    hash_secret,
    nullable_time,
    optional_time,
    page_limit,
    timestamp,
)
from persona_service.orgs.keys import KeyService
from persona_service.orgs.records import ApiKeyRecord


def api_key(row: ApiKeyRecord) -> keys_pb2.ApiKey:
    return keys_pb2.ApiKey(
        id=row.id, name=row.name, scopes=row.scopes, mode=row.mode, prefix=row.prefix,
        ip_allowlist=row.ip_allowlist, workspace_id=row.workspace_id, created_at=timestamp(row.created_at),
        expires_at=nullable_time(row.expires_at), revoked_at=nullable_time(row.revoked_at),
    )


class ApiKeyServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps

    def _service(self, ctx: RequestContext) -> KeyService:
        return KeyService(ctx.work, self.deps.cursors)

    def CreateApiKey(self, request: keys_pb2.CreateApiKeyRequest,
                     ctx: RequestContext) -> keys_pb2.CreateApiKeyResponse:
        p = ctx.caller
        row, secret = self._service(ctx).create(
            p, org_id=p.org_id, workspace_id=p.workspace_id, user_id=p.user_id, plan=p.plan,
            name=request.name, scopes=list(request.scopes), mode=request.mode,
            expires_at=optional_time(request, "expires_at"), ip_allowlist=list(request.ip_allowlist),
        )
        # Every process forgets a refusal of this secret (kernel.transport.auth): the key works at once everywhere.
        ctx.after_commit.append(lambda: self.deps.invalidate("cred:key:" + hash_secret(secret)))
        return keys_pb2.CreateApiKeyResponse(key=api_key(row), secret=secret)

    def ListApiKeys(self, request: keys_pb2.ListApiKeysRequest,
                    ctx: RequestContext) -> keys_pb2.ListApiKeysResponse:
        rows, cursor = self._service(ctx).list(ctx.caller, page_limit(request), request.cursor)
        return keys_pb2.ListApiKeysResponse(items=[api_key(r) for r in rows], next_cursor=cursor)

    def GetApiKey(self, request: keys_pb2.GetApiKeyRequest, ctx: RequestContext) -> keys_pb2.ApiKey:
        return api_key(self._service(ctx).get(ctx.caller, request.id))

    def RevokeApiKey(self, request: keys_pb2.RevokeApiKeyRequest, ctx: RequestContext) -> keys_pb2.ApiKey:
        row, secret_hash = self._service(ctx).revoke(ctx.caller, request.id)
        if secret_hash is not None:
            ctx.after_commit.append(lambda: self.deps.invalidate("cred:key:" + secret_hash))
        return api_key(row)
