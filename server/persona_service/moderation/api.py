"""What other modules may use of `moderation` (its public surface): recording
a verdict on their content. Everything else in this folder is private to it."""

from persona_service.moderation.service import ModerationBlocked, record_flag

__all__ = ["ModerationBlocked", "record_flag"]
