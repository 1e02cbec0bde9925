"""Python client for the Persona Service API.

    from persona_sdk import PersonaClient

    with PersonaClient(api_key="sk_live_…") as client:
        persona = client.personas.create(intent="A patient gardener who names every snail")
        print(persona.display_name)

`AsyncPersonaClient` is the same surface for asyncio; the API's objects are in
`persona_sdk.types` (pydantic models, and the TypedDicts of request params).
"""

from . import types, webhooks
from ._client import AsyncPersonaClient, PersonaClient
from ._core import DEFAULT_BASE_URL
from ._errors import (
    APIConnectionError,
    APITimeoutError,
    AssetExpiredError,
    AuditBlockedError,
    BadRequestError,
    DriftBlockedError,
    ForbiddenError,
    HeadersTooLargeError,
    IdempotencyConflictError,
    InternalServerError,
    MethodNotAllowedError,
    ModerationBlockedError,
    NotFoundError,
    NotImplementedByServerError,
    PayloadTooLargeError,
    PersonaError,
    PreconditionFailedError,
    ProviderError,
    ProviderTimeoutError,
    QuotaExceededError,
    RateLimitedError,
    RequestTimeoutError,
    ServiceUnavailableError,
    StateConflictError,
    StreamLostError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
    UpgradeRequiredError,
    ValidationFailedError,
    WebhookVerificationError,
)
from ._streaming import (
    AsyncChatStream,
    AsyncCompletionStream,
    AsyncEventStream,
    AsyncPersonaStream,
    ChatStream,
    CompletionStream,
    EventStream,
    PersonaStream,
    ServerSentEvent,
    SSEDecoder,
)
from ._version import VERSION

__version__ = VERSION

__all__ = [
    "DEFAULT_BASE_URL",
    "APIConnectionError",
    "APITimeoutError",
    "AssetExpiredError",
    "AsyncChatStream",
    "AsyncCompletionStream",
    "AsyncEventStream",
    "AsyncPersonaClient",
    "AsyncPersonaStream",
    "AuditBlockedError",
    "BadRequestError",
    "ChatStream",
    "CompletionStream",
    "DriftBlockedError",
    "EventStream",
    "ForbiddenError",
    "HeadersTooLargeError",
    "IdempotencyConflictError",
    "InternalServerError",
    "MethodNotAllowedError",
    "ModerationBlockedError",
    "NotFoundError",
    "NotImplementedByServerError",
    "PayloadTooLargeError",
    "PersonaClient",
    "PersonaError",
    "PersonaStream",
    "PreconditionFailedError",
    "ProviderError",
    "ProviderTimeoutError",
    "QuotaExceededError",
    "RateLimitedError",
    "RequestTimeoutError",
    "SSEDecoder",
    "ServerSentEvent",
    "ServiceUnavailableError",
    "StateConflictError",
    "StreamLostError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "UpgradeRequiredError",
    "ValidationFailedError",
    "WebhookVerificationError",
    "__version__",
    "types",
    "webhooks",
]
