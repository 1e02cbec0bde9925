"""Server-sent events as the edge delivers a stream (the edge sees every
server-streaming RPC as a stream of `google.api.HttpBody`, see
process.edge.edge_descriptor).

Every frame carries `id: <run id>.<seq>` (what `Last-Event-ID` resumes
from). A typed message becomes `event: <its event field>` and `data:
<its JSON>` (kernel.transport.convert.message_json: as the transcoder prints
unary responses), and the stream ends with `event: end` whose data is the
run's `{"runId", "status"}` (completed | failed | lost | detached). An
`HttpBody` stream (the OpenAI-compatible completions) frames its own
`data:` lines and terminator (`data: [DONE]`); it gets the `id:` line only,
because OpenAI clients treat any `event:` as a different kind of message.
"""

from __future__ import annotations

import json

from google.api import httpbody_pb2
from google.protobuf.message import Message
from persona.v1 import errors_pb2

from persona_service.kernel.errors import ApiError
from persona_service.kernel.transport.convert import message_json
from persona_service.kernel.transport.errors import envelope, error_message
from persona_service.kernel.transport.policy import MethodMeta

CONTENT_TYPE = "text/event-stream"


def _body(text: bytes) -> bytes:
    return bytes(httpbody_pb2.HttpBody(content_type=CONTENT_TYPE, data=text).SerializeToString())


def frames(meta: MethodMeta, run_id: str, batch: list[tuple[int, bytes]]) -> bytes:
    """The events of a batch of a run's frames ((seq, payload), in order) in
    one message: one write to the edge and on to the client, not one per frame."""
    return _body(b"".join(_event(meta, run_id, seq, payload) for seq, payload in batch))


def _event(meta: MethodMeta, run_id: str, seq: int, payload: bytes) -> bytes:
    event_id = f"id: {run_id}.{seq}\n".encode()
    if meta.raw_stream:
        return event_id + bytes(httpbody_pb2.HttpBody.FromString(payload).data)
    message = meta.response_class.FromString(payload)
    data = json.dumps(message_json(message), separators=(",", ":"), ensure_ascii=False)
    event = getattr(message, "event", "")
    head = f"event: {event}\n".encode() if isinstance(event, str) and event else b""
    return event_id + head + b"data: " + data.encode() + b"\n\n"


def end(run_id: str, status: str) -> bytes:
    data = json.dumps({"runId": run_id, "status": status}, separators=(",", ":"))
    return _body(f"event: end\ndata: {data}\n\n".encode())


def keep_alive() -> bytes:
    """A comment line: every SSE client ignores it; proxies see the stream is alive (kernel.transport.runs.KEEP_ALIVE_SECONDS)."""
    return _body(b": keep-alive\n\n")


def error_frame(meta: MethodMeta, err: ApiError) -> Message | None:
    """The in-band `error` event of a failure the operation did not frame itself (an outage, a bug): the
    envelope's `error` object, as the servicers frame theirs (`event: error`; a raw stream's `data:` line
    with the envelope, as OpenAI clients expect). None for a stream whose messages have no `error` event."""
    if meta.raw_stream:
        data = json.dumps(envelope(err), separators=(",", ":"), ensure_ascii=False)
        frame: Message = httpbody_pb2.HttpBody(content_type=CONTENT_TYPE, data=f"data: {data}\n\n".encode())
        return frame
    fields = meta.response_class.DESCRIPTOR.fields_by_name
    error = fields.get("error")
    if "event" not in fields or error is None or error.message_type is not errors_pb2.Error.DESCRIPTOR:
        return None
    return meta.response_class(event="error", error=error_message(err))
