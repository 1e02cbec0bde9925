"""What other modules may use of `privacy` (its public surface); everything
else in this folder is private to it."""

from persona_service.privacy.service import PrivacyService
from persona_service.privacy.settings import PrivacySettings

__all__ = ["PrivacyService", "PrivacySettings"]
