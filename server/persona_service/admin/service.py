"""Platform-admin operations."""

from __future__ import annotations

from persona_service.kernel.errors import ServiceUnavailable


class DsarBuilder:
    """Builds DSAR exports. The privacy-export feature is not configured yet,
    so the entry point answers 503 as the spec prescribes."""

    def build_one(self):
        raise ServiceUnavailable("The DSAR build entry point is not configured.", {"feature": "privacy_exports"})
