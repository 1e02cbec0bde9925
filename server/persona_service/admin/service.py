"""Platform-admin operations: the DSAR build entry point (the privacy module builds)."""

from __future__ import annotations

from collections.abc import Sequence

from persona_service.files.api import Storage
from persona_service.kernel.api import PersonalDataExport, ServiceUnavailable, Work
from persona_service.privacy.api import PrivacyService, PrivacySettings


def build_one_export(work: Work, storage: Storage, exporters: Sequence[PersonalDataExport],
                     settings: PrivacySettings) -> str | None:
    """Build the oldest pending privacy export in this unit of work (its id);
    503 when exports are not configured."""
    if not settings.dsar_exports:
        raise ServiceUnavailable("The DSAR build entry point is not configured.", {"feature": "privacy_exports"})
    built = PrivacyService(work).build(storage, exporters, settings.dsar_download_ttl_seconds)
    return built.id if built else None
