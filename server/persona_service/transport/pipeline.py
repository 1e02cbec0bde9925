"""The request pipeline, as one gRPC server interceptor.

For every persona.v1 RPC, in order: request id → unit of work → authenticate
→ authorize against the method's declared policy → validate the request
from its proto rules → run the servicer → commit → response headers. Any
ApiError, or any unexpected exception (500 `internal_error`, logged with the
request id, no detail leaked), is translated by `transport.errors`.
"""

from __future__ import annotations

import ipaddress
import logging

import grpc

from persona_service import ids
from persona_service.db.uow import UnitOfWork
from persona_service.domain.access import authorize
from persona_service.domain.auth import check_client_address
from persona_service.errors import ApiError, InternalError
from persona_service.transport import context as request_context
from persona_service.transport.errors import abort
from persona_service.transport.policy import PACKAGE
from persona_service.transport.validation import validate

log = logging.getLogger("persona_service.requests")


class RequestPipeline(grpc.ServerInterceptor):
    def __init__(self, app, policies):
        self.app = app
        self.policies = policies
        self._trusted = [ipaddress.ip_network(n.strip(), strict=False) for n in app.settings.trusted_proxies if n.strip()]

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or not details.method.startswith("/" + PACKAGE):
            return handler
        policy = self.policies[details.method]
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, details.method, policy),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._streaming(handler.unary_stream, details.method, policy),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    # --- the stages -------------------------------------------------------

    def _begin(self, request, context, method, policy) -> request_context.RequestContext:
        metadata = dict(context.invocation_metadata())
        ctx = request_context.RequestContext(
            request_id=metadata.get("x-request-id") or ids.new_id("request"),
            method=method,
            uow=UnitOfWork(self.app.engine),
            client_ip=self._client_ip(context.peer(), metadata.get("x-forwarded-for")),
        )
        ctx.headers.append(("x-request-id", ctx.request_id))
        return ctx

    def _admit(self, ctx, request, metadata, policy) -> None:
        principal = self.app.authenticator.authenticate(metadata.get("authorization"), lambda: ctx.conn)
        check_client_address(principal, ctx.client_ip)
        authorize(principal, scope=policy.scope, roles=policy.roles, platform_admin=policy.platform_admin)
        ctx.principal = principal
        validate(request)

    def _finish(self, ctx) -> None:
        ctx.uow.commit()
        for hook in ctx.after_commit:
            try:
                hook()
            except Exception:
                log.exception("after-commit hook failed", extra={"request_id": ctx.request_id})

    def _fail(self, ctx, context, exc: Exception) -> None:
        if isinstance(exc, ApiError):
            err = exc
        else:
            log.exception("unhandled error in %s [request_id=%s]", ctx.method, ctx.request_id)
            err = InternalError()
        self._log(ctx, err.spec.http_status)
        abort(context, err, ctx.headers)

    def _log(self, ctx, status: int) -> None:
        principal = ctx.principal
        log.info(
            "%s status=%s request_id=%s org=%s credential=%s",
            ctx.method, status, ctx.request_id,
            principal.org_id if principal else "-", principal.credential_id if principal else "-",
        )

    # --- handlers -----------------------------------------------------------

    def _unary(self, behavior, method, policy):
        def handle(request, context):
            ctx = self._begin(request, context, method, policy)
            token = request_context.bind(ctx)
            try:
                self._admit(ctx, request, dict(context.invocation_metadata()), policy)
                response = behavior(request, context)
                self._finish(ctx)
            except Exception as exc:  # noqa: BLE001 - translated, never leaked
                ctx.uow.close()
                request_context.unbind(token)
                self._fail(ctx, context, exc)
            else:
                ctx.uow.close()
                request_context.unbind(token)
                context.send_initial_metadata(ctx.headers)
                self._log(ctx, 200)
                return response

        return handle

    def _streaming(self, behavior, method, policy):
        def handle(request, context):
            ctx = self._begin(request, context, method, policy)
            token = request_context.bind(ctx)
            try:
                self._admit(ctx, request, dict(context.invocation_metadata()), policy)
                context.send_initial_metadata(ctx.headers)
                yield from behavior(request, context)
                self._finish(ctx)
            except Exception as exc:  # noqa: BLE001
                ctx.uow.close()
                request_context.unbind(token)
                self._fail(ctx, context, exc)
            else:
                ctx.uow.close()
                request_context.unbind(token)

        return handle

    def _client_ip(self, peer: str, forwarded_for: str | None) -> str | None:
        """The client address: the peer, or, when the peer is the trusted edge,
        the address Envoy appended to X-Forwarded-For."""
        address = _peer_address(peer)
        if forwarded_for and address is not None:
            try:
                trusted = any(ipaddress.ip_address(address) in net for net in self._trusted)
            except ValueError:
                trusted = False
            if trusted:
                return forwarded_for.split(",")[-1].strip()
        return address


def _peer_address(peer: str) -> str | None:
    # "ipv4:127.0.0.1:5555", "ipv6:[::1]:5555", "unix:/path"
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return None
