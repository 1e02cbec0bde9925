"""Server-sent events as the edge delivers a stream (the edge sees every
server-streaming RPC as a stream of `google.api.HttpBody`, see
kernel.edge.edge_descriptor).

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

from persona_service.kernel.transport.convert import message_json
from persona_service.kernel.transport.policy import MethodMeta

CONTENT_TYPE = "text/event-stream"


def _body(text: bytes) -> bytes:
    return httpbody_pb2.HttpBody(content_type=CONTENT_TYPE, data=text).SerializeToString()


def frame(meta: MethodMeta, run_id: str, seq: int, payload: bytes) -> bytes:
    event_id = f"id: {run_id}.{seq}\n".encode()
    if meta.raw_stream:
        return _body(event_id + httpbody_pb2.HttpBody.FromString(payload).data)
    message = meta.response_class.FromString(payload)
    data = json.dumps(message_json(message), separators=(",", ":"), ensure_ascii=False)
    event = getattr(message, "event", "")
    head = f"event: {event}\n".encode() if isinstance(event, str) and event else b""
    return _body(event_id + head + b"data: " + data.encode() + b"\n\n")


def end(run_id: str, status: str) -> bytes:
    data = json.dumps({"runId": run_id, "status": status}, separators=(",", ":"))
    return _body(f"event: end\ndata: {data}\n\n".encode())
