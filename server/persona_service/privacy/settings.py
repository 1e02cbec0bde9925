"""Privacy exports' settings."""

from __future__ import annotations

from pydantic import Field

from persona_service.kernel.api import Section


class PrivacySettings(Section):
    dsar_exports: bool = Field(
        True, description="privacy exports (DSAR) are built; false: `POST /v1/admin/dsar/build-one` answers 503 "
                          "(the spec's 'entry point not configured') and nothing builds them",
    )
    dsar_download_ttl_seconds: int = Field(
        7 * 24 * 3600, ge=60, le=30 * 24 * 3600, description="how long an export's signed download URL works",
    )
