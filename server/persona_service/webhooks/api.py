"""What other modules may use of `webhooks` (its public surface); everything
else in this folder is private to it."""

from persona_service.webhooks.service import WebhookService
from persona_service.webhooks.settings import WebhookSettings

__all__ = ["WebhookService", "WebhookSettings"]
