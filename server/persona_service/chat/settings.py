"""Chat's settings: per-model prices (see `pricing`)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from persona_service.kernel.settings import Section


class ModelPrice(BaseModel):
    """USD per million tokens."""

    input: float = 0.0
    output: float = 0.0


class ChatSettings(Section):
    model_prices: Annotated[dict[str, ModelPrice], NoDecode] = Field(
        default_factory=dict,
        description='JSON `{model: {input, output}}` in USD per million tokens, for `costUsdMicros`, over the '
                    'built-in prices (`local-persona-1`: 0.5 and 1.5; OpenAI\'s list prices for gpt-4o, '
                    'gpt-4o-mini, gpt-4.1, gpt-4.1-mini, gpt-4.1-nano, o3, o3-mini, o4-mini and '
                    'text-embedding-3-small/-large); `"*"` prices any other model, else its cost is reported as '
                    'unknown (`unpriced`), not $0',
    )

    @field_validator("model_prices", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"expected JSON ({exc})") from None
