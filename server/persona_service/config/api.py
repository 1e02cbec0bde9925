"""What other modules may use of `config` (its public surface): resolved
configuration values. Everything else in this folder is private to it."""

from persona_service.config.service import ConfigService

__all__ = ["ConfigService"]
