"""Python client for the Persona Service API.

    from persona_sdk import PersonaClient

    with PersonaClient(api_key="sk_live_…") as client:
        persona = client.personas.create(intent="A patient gardener who names every snail")
"""

from . import webhooks
from ._client import PersonaClient
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
from ._generated import API_VERSION
from ._streaming import ChatMessageEvent, ChatStream, EventStream, PersonaStream, PipelineEvent, ServerSentEvent
from ._version import VERSION

__version__ = VERSION

__all__ = [
    "API_VERSION",
    "DEFAULT_BASE_URL",
    "APIConnectionError",
    "APITimeoutError",
    "AssetExpiredError",
    "AuditBlockedError",
    "BadRequestError",
    "ChatMessageEvent",
    "ChatStream",
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
    "PipelineEvent",
    "PreconditionFailedError",
    "ProviderError",
    "ProviderTimeoutError",
    "QuotaExceededError",
    "RateLimitedError",
    "RequestTimeoutError",
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
    "webhooks",
]
