"""The OpenAI-compatible surface: OpenAI's wire shapes in, domain call, out.

Unary completions are typed messages (`ChatCompletion`); the streamed form
writes `text/event-stream` bytes itself (google.api.HttpBody), so every
`data:` line is a JSON `chat.completion.chunk` except the final `[DONE]`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator

from google.api import httpbody_pb2
from google.protobuf import json_format, struct_pb2
from persona.v1 import openai_pb2

from persona_service.chat.completions import CompletionService, CompletionStarted, model_id
from persona_service.chat.json_support import JSONObject, as_object, first_object
from persona_service.chat.openai_errors import openai_envelope
from persona_service.chat.service import Reply
from persona_service.kernel.api import (
    ApiError,
    GenerationOptions,
    Message,
    RequestContext,
    RunLost,
    ServicerDeps,
    ToolCall,
    ValidationFailed,
    Violation,
    drain,
)
from persona_service.personas.api import PersonaRecord, PersonaSummary
from persona_service.providers.pricing import PriceTable

_NULL = struct_pb2.Value(null_value=struct_pb2.NULL_VALUE)


def _text(value: struct_pb2.Value) -> str:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "list_value":  # content parts
        parts: object = json_format.MessageToDict(value)  # a list_value's: a list
        texts = [p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type", "text") == "text"] \
            if isinstance(parts, list) else []
        # (_content_violations refused a text part whose text is no string.)
        return "".join(text for text in texts if isinstance(text, str))
    return ""


# OpenAI's rule for a function's name (a tool's, a tool choice's): letters, digits, `_` and `-`, 1 to 64.
_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NAME_FORMAT = {"format": "function name (letters, digits, `_` and `-`, 1 to 64 of them)",
                "pattern": _FUNCTION_NAME.pattern}


def _absent(value: struct_pb2.Value, present: bool) -> bool:
    return not present or value.WhichOneof("kind") in (None, "null_value")


def _content_violations(path: str, content: struct_pb2.Value) -> list[Violation]:
    """A message's content is a string, null, or an array of parts, each an object; a text part's `text` is a
    string (as OpenAI has it: anything else is a 400 naming the place, not a message read as empty)."""
    kind = content.WhichOneof("kind")
    if kind in (None, "null_value", "string_value"):
        return []
    if kind != "list_value":
        return [Violation(path, "type", json_format.MessageToDict(content), {"type": "string or array"})]
    out = []
    for j, part in enumerate(content.list_value.values):
        if part.WhichOneof("kind") != "struct_value":
            out.append(Violation(f"{path}[{j}]", "type", json_format.MessageToDict(part), {"type": "object"}))
            continue
        fields = part.struct_value.fields
        kind_of = fields["type"].string_value if "type" in fields else "text"
        if kind_of == "text" and ("text" not in fields or fields["text"].WhichOneof("kind") != "string_value"):
            out.append(Violation(f"{path}[{j}].text", "type",
                                 json_format.MessageToDict(fields["text"]) if "text" in fields else None,
                                 {"type": "string"}))
    return out


def violations(request: openai_pb2.CreateChatCompletionRequest) -> list[Violation]:
    """What OpenAI refuses beyond the proto's rules: a message without content (only an assistant message
    with tool calls may have none), a tool message answering no call, a function name OpenAI would refuse."""
    out = []
    for i, m in enumerate(request.messages):
        if m.role in ("system", "developer", "user", "tool") and _absent(m.content, m.HasField("content")):
            out.append(Violation(f"messages[{i}].content", "required", None, {"role": m.role}))
        elif m.role == "assistant" and not m.tool_calls and _absent(m.content, m.HasField("content")):
            out.append(Violation(f"messages[{i}].content", "required", None, {"unless": "tool_calls"}))
        out += _content_violations(f"messages[{i}].content", m.content)
        if m.role == "tool" and not m.tool_call_id:
            out.append(Violation(f"messages[{i}].tool_call_id", "required", None, {"role": "tool"}))
        for j, call in enumerate(m.tool_calls):
            if not _FUNCTION_NAME.fullmatch(call.function.name):
                out.append(Violation(f"messages[{i}].tool_calls[{j}].function.name", "format", call.function.name,
                                     _NAME_FORMAT))
    for i, tool in enumerate(request.tools):
        function = tool.fields["function"] if "function" in tool.fields else None
        names = function.struct_value.fields if function is not None and function.HasField("struct_value") else {}
        name = names["name"] if "name" in names else None
        if name is None or name.WhichOneof("kind") != "string_value":
            out.append(Violation(f"tools[{i}].function.name", "required", None, {}))
        elif not _FUNCTION_NAME.fullmatch(name.string_value):
            out.append(Violation(f"tools[{i}].function.name", "format", name.string_value, _NAME_FORMAT))
    return out


def conversation(request: openai_pb2.CreateChatCompletionRequest) -> list[Message]:
    out = []
    for m in request.messages:
        role = "system" if m.role == "developer" else m.role
        calls = tuple(ToolCall(c.id, c.function.name, c.function.arguments) for c in m.tool_calls)
        out.append(Message(role, _text(m.content), name=m.name, tool_call_id=m.tool_call_id, tool_calls=calls))
    return out


def options(request: openai_pb2.CreateChatCompletionRequest) -> GenerationOptions:
    max_tokens = None
    if request.HasField("max_completion_tokens"):
        max_tokens = request.max_completion_tokens
    elif request.HasField("max_tokens"):
        max_tokens = request.max_tokens
    return GenerationOptions(
        temperature=request.temperature if request.HasField("temperature") else None,
        max_tokens=max_tokens,
        tools=tuple(json_format.MessageToDict(t) for t in request.tools),
        tool_choice=json_format.MessageToDict(request.tool_choice) if request.HasField("tool_choice") else None,
        task="reply",
    )


def _model(row: PersonaSummary | PersonaRecord, version: int = 0) -> openai_pb2.Model:
    return openai_pb2.Model(id=model_id(row.id, version), object="model", created=int(row.created_at.timestamp()),
                            owned_by=row.org_id)


def _tool_call(call: ToolCall) -> openai_pb2.ChatCompletionToolCall:
    return openai_pb2.ChatCompletionToolCall(
        id=call.id, type="function",
        function=openai_pb2.ChatCompletionFunctionCall(name=call.name, arguments=call.arguments),
    )


def _usage(reply: Reply) -> dict[str, int]:
    return {"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens}


def _sse(payload: str | JSONObject) -> httpbody_pb2.HttpBody:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return httpbody_pb2.HttpBody(content_type="text/event-stream", data=f"data: {data}\n\n".encode())


def _released(frames: list[bytes]) -> tuple[tuple[str, int] | None, tuple[str, ...]]:
    """The id, creation time and content deltas an earlier attempt of the run streamed, to go on from
    (kernel.transport.runs)."""
    if not frames:
        return None, ()
    head, *chunks = [_chunk(frame) for frame in frames]
    texts = []
    for chunk in chunks:
        choice = first_object(chunk.get("choices")) or {}
        delta = as_object(choice.get("delta", {})) or {}
        content = delta.get("content")
        if set(delta) != {"content"} or choice.get("finish_reason") or not isinstance(content, str):
            raise RunLost()  # a tool call (no prefill continues one), its end or an error was sent
        texts.append(content)
    completion_id, created = head.get("id"), head.get("created")
    if not isinstance(completion_id, str) or not isinstance(created, int):
        raise RunLost()  # not a first chunk this servicer wrote: nothing to go on from
    return (completion_id, created), tuple(texts)


def _chunk(frame: bytes) -> JSONObject:
    data = httpbody_pb2.HttpBody.FromString(frame).data.decode().removeprefix("data: ").strip()
    return {} if data == "[DONE]" else as_object(json.loads(data)) or {}


class OpenAIServicer:
    def __init__(self, deps: ServicerDeps) -> None:
        self.deps = deps
        self.prices = PriceTable.from_env()

    def _service(self, ctx: RequestContext, provider: bool = False) -> CompletionService:
        return CompletionService(ctx.work, self.deps.provider_for(ctx) if provider else None, self.prices)

    def ListModels(self, request: openai_pb2.ListModelsRequest,
                   ctx: RequestContext) -> openai_pb2.ListModelsResponse:
        rows = self._service(ctx).models(ctx.caller)
        return openai_pb2.ListModelsResponse(object="list", data=[_model(r) for r in rows])

    def GetModel(self, request: openai_pb2.GetModelRequest, ctx: RequestContext) -> openai_pb2.Model:
        return _model(*self._service(ctx).model(ctx.caller, request.model))

    def CreateChatCompletion(self, request: openai_pb2.CreateChatCompletionRequest,
                             ctx: RequestContext) -> openai_pb2.ChatCompletion:
        if found := violations(request):
            raise ValidationFailed(found)
        operation = self._service(ctx, provider=True).complete(
            ctx.caller, request.model, conversation(request), options(request), request.user,
        )
        result = drain(operation)
        reply = result.reply
        message = openai_pb2.ChatCompletionMessage(
            role="assistant", tool_calls=[_tool_call(c) for c in reply.tool_calls], refusal=_NULL,
            content=struct_pb2.Value(string_value=reply.text) if reply.text or not reply.tool_calls else _NULL,
        )
        return openai_pb2.ChatCompletion(
            id=result.id, object="chat.completion", created=result.created, model=request.model,
            choices=[openai_pb2.ChatCompletionChoice(index=0, message=message, finish_reason=reply.finish_reason,
                                                     logprobs=_NULL)],
            usage=openai_pb2.CompletionUsage(**_usage(reply)), system_fingerprint=reply.model,
        )

    def StreamChatCompletion(self, request: openai_pb2.CreateChatCompletionRequest,
                             ctx: RequestContext
                             ) -> Generator[httpbody_pb2.HttpBody, None, list[httpbody_pb2.HttpBody]]:
        if found := violations(request):
            raise ValidationFailed(found)
        include_usage = request.stream_options.include_usage
        opened, earlier = _released(ctx.run.earlier_frames())
        operation = self._service(ctx, provider=True).complete(
            ctx.caller, request.model, conversation(request), options(request), request.user, stream=True,
            earlier=earlier, started=opened,
        )
        head: JSONObject = {}
        started = False

        def chunk(delta: JSONObject, finish: str | None = None) -> JSONObject:
            body: JSONObject = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            if include_usage:
                body["usage"] = None
            return body

        announced: set[int] = set()
        try:
            while True:
                try:
                    progress = next(operation)
                except StopIteration as done:
                    reply = done.value.reply  # the result frames: sent once the reply is committed
                    usage = [_sse({**head, "choices": [], "usage": _usage(reply)})] if include_usage else []
                    return [_sse(chunk({}, reply.finish_reason)), *usage, _sse("[DONE]")]
                if isinstance(progress, CompletionStarted):
                    started = True
                    head = {"id": progress.id, "object": "chat.completion.chunk", "created": progress.created,
                            "model": request.model, "system_fingerprint": None}
                    yield _sse(chunk({"role": "assistant", "content": ""}))
                    continue
                delta = progress.delta
                if delta.tool_call is not None:
                    index, call = delta.tool_call_index, delta.tool_call
                    entry: JSONObject = {"index": index, "function": {"arguments": call.arguments}}
                    if index not in announced:
                        announced.add(index)
                        entry = {"index": index, "id": call.id, "type": "function",
                                 "function": {"name": call.name, "arguments": call.arguments}}
                    yield _sse(chunk({"tool_calls": [entry]}))
                else:
                    yield _sse(chunk({"content": delta.text}))
        except ApiError as err:
            # In-band once the stream has started (OpenAI clients raise on an
            # `error` chunk); before that, a plain error response.
            if started:
                yield _sse(openai_envelope(err))
            raise
