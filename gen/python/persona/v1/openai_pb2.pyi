from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from persona.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("object", "data")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    object: str
    data: _containers.RepeatedCompositeFieldContainer[Model]
    def __init__(self, object: _Optional[str] = ..., data: _Optional[_Iterable[_Union[Model, _Mapping]]] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("id", "object", "created", "owned_by")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    OWNED_BY_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    owned_by: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., owned_by: _Optional[str] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class ChatCompletionFunctionCall(_message.Message):
    __slots__ = ("name", "arguments")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments: str
    def __init__(self, name: _Optional[str] = ..., arguments: _Optional[str] = ...) -> None: ...

class ChatCompletionToolCall(_message.Message):
    __slots__ = ("id", "type", "function")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    function: ChatCompletionFunctionCall
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., function: _Optional[_Union[ChatCompletionFunctionCall, _Mapping]] = ...) -> None: ...

class ChatCompletionRequestMessage(_message.Message):
    __slots__ = ("role", "content", "name", "tool_call_id", "tool_calls", "refusal", "annotations", "audio", "function_call")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: _struct_pb2.Value
    name: str
    tool_call_id: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ChatCompletionToolCall]
    refusal: _struct_pb2.Value
    annotations: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    audio: _struct_pb2.Struct
    function_call: _struct_pb2.Value
    def __init__(self, role: _Optional[str] = ..., content: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., name: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ChatCompletionToolCall, _Mapping]]] = ..., refusal: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., annotations: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., audio: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., function_call: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ChatCompletionStreamOptions(_message.Message):
    __slots__ = ("include_usage",)
    INCLUDE_USAGE_FIELD_NUMBER: _ClassVar[int]
    include_usage: bool
    def __init__(self, include_usage: _Optional[bool] = ...) -> None: ...

class CreateChatCompletionRequest(_message.Message):
    __slots__ = ("model", "messages", "temperature", "max_tokens", "stream", "stream_options", "tools", "tool_choice", "user", "max_completion_tokens", "top_p", "n", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "seed", "response_format", "parallel_tool_calls", "store", "metadata", "service_tier", "reasoning_effort", "modalities", "prediction", "audio", "web_search_options", "functions", "function_call", "verbosity", "prompt_cache_key", "safety_identifier")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STREAM_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    MAX_COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    LOGIT_BIAS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SERVICE_TIER_FIELD_NUMBER: _ClassVar[int]
    REASONING_EFFORT_FIELD_NUMBER: _ClassVar[int]
    MODALITIES_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_FIELD_NUMBER: _ClassVar[int]
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    WEB_SEARCH_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FUNCTIONS_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    VERBOSITY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_CACHE_KEY_FIELD_NUMBER: _ClassVar[int]
    SAFETY_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    model: str
    messages: _containers.RepeatedCompositeFieldContainer[ChatCompletionRequestMessage]
    temperature: float
    max_tokens: int
    stream: bool
    stream_options: ChatCompletionStreamOptions
    tools: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    tool_choice: _struct_pb2.Value
    user: str
    max_completion_tokens: int
    top_p: float
    n: int
    stop: _struct_pb2.Value
    presence_penalty: float
    frequency_penalty: float
    logit_bias: _struct_pb2.Struct
    logprobs: bool
    top_logprobs: int
    seed: float
    response_format: _struct_pb2.Struct
    parallel_tool_calls: bool
    store: bool
    metadata: _struct_pb2.Struct
    service_tier: str
    reasoning_effort: str
    modalities: _containers.RepeatedScalarFieldContainer[str]
    prediction: _struct_pb2.Struct
    audio: _struct_pb2.Struct
    web_search_options: _struct_pb2.Struct
    functions: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    function_call: _struct_pb2.Value
    verbosity: str
    prompt_cache_key: str
    safety_identifier: str
    def __init__(self, model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ChatCompletionRequestMessage, _Mapping]]] = ..., temperature: _Optional[float] = ..., max_tokens: _Optional[int] = ..., stream: _Optional[bool] = ..., stream_options: _Optional[_Union[ChatCompletionStreamOptions, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., tool_choice: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., user: _Optional[str] = ..., max_completion_tokens: _Optional[int] = ..., top_p: _Optional[float] = ..., n: _Optional[int] = ..., stop: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., logit_bias: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., logprobs: _Optional[bool] = ..., top_logprobs: _Optional[int] = ..., seed: _Optional[float] = ..., response_format: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., parallel_tool_calls: _Optional[bool] = ..., store: _Optional[bool] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., service_tier: _Optional[str] = ..., reasoning_effort: _Optional[str] = ..., modalities: _Optional[_Iterable[str]] = ..., prediction: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., audio: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., web_search_options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., functions: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., function_call: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., verbosity: _Optional[str] = ..., prompt_cache_key: _Optional[str] = ..., safety_identifier: _Optional[str] = ...) -> None: ...

class ChatCompletionMessage(_message.Message):
    __slots__ = ("role", "content", "tool_calls", "refusal")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    REFUSAL_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: _struct_pb2.Value
    tool_calls: _containers.RepeatedCompositeFieldContainer[ChatCompletionToolCall]
    refusal: _struct_pb2.Value
    def __init__(self, role: _Optional[str] = ..., content: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., tool_calls: _Optional[_Iterable[_Union[ChatCompletionToolCall, _Mapping]]] = ..., refusal: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ChatCompletionChoice(_message.Message):
    __slots__ = ("index", "message", "finish_reason", "logprobs")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    index: int
    message: ChatCompletionMessage
    finish_reason: str
    logprobs: _struct_pb2.Value
    def __init__(self, index: _Optional[int] = ..., message: _Optional[_Union[ChatCompletionMessage, _Mapping]] = ..., finish_reason: _Optional[str] = ..., logprobs: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class CompletionUsage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "total_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ...) -> None: ...

class ChatCompletion(_message.Message):
    __slots__ = ("id", "object", "created", "model", "choices", "usage", "system_fingerprint")
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    created: int
    model: str
    choices: _containers.RepeatedCompositeFieldContainer[ChatCompletionChoice]
    usage: CompletionUsage
    system_fingerprint: str
    def __init__(self, id: _Optional[str] = ..., object: _Optional[str] = ..., created: _Optional[int] = ..., model: _Optional[str] = ..., choices: _Optional[_Iterable[_Union[ChatCompletionChoice, _Mapping]]] = ..., usage: _Optional[_Union[CompletionUsage, _Mapping]] = ..., system_fingerprint: _Optional[str] = ...) -> None: ...
