"""Probe and metrics settings."""

from __future__ import annotations

from pydantic import Field

from persona_service.kernel.api import Section


class ProbeSettings(Section):
    metrics_token: str = Field(
        "", description="bearer token `GET /metrics` requires; empty: open (keep the edge private then)",
    )
