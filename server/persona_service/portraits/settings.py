"""Portraits' settings."""

from __future__ import annotations

from pydantic import Field

from persona_service.kernel.api import Section


class PortraitSettings(Section):
    portrait_wait_seconds: float = Field(
        5.0, ge=0, le=30, allow_inf_nan=False,
        description="how long a generate or edit call waits for its image before answering the row as it is "
                    "(`pending`/`generating`; poll it); 0 answers at once",
    )
