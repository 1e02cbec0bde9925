"""Request identity: the request id every answer and log line carries, and
the RPC's trace span (child of the caller's `traceparent`)."""

from __future__ import annotations

import re
import uuid

from persona_service.kernel import tracing
from persona_service.kernel.transport.stages.call import Call

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")


def request_id(metadata: dict[str, str]) -> str:
    """The caller's `x-request-id` when well formed, else a new one."""
    given = metadata.get("x-request-id", "")
    if _REQUEST_ID.match(given):
        return given
    # A uuid4 as Envoy makes them (one format, whichever door the call came in by);
    # not a cuid2: measured 1.7 µs against 57 µs, on every call without an id.
    return str(uuid.uuid4())


def span(call: Call, **attributes: str) -> tracing.ServerSpan | None:
    """The RPC's span (None unless traces are exported), current on this thread until it ends."""
    if not tracing.enabled():
        return None  # the common case: nothing built per request
    path = call.meta.path
    return tracing.server_span(path, call.ctx.traceparent, **{
        "rpc.system": "grpc", "rpc.method": path, "request.id": call.ctx.request_id, **attributes})
