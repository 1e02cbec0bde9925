"""Per-model prices, from configuration.

`PERSONA_MODEL_PRICES` holds JSON: model name → `{"input": <USD per million
input tokens>, "output": <USD per million output tokens>}`; a `"*"` entry
prices any other model. Without it, DEFAULT_PRICES apply (the local model,
and 0 for unknown models). Since a price is in USD per million tokens,
tokens × price is the cost in micro-USD exactly; each reply's cost is
rounded to a whole micro-dollar.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from persona_service.chat.settings import ChatSettings
from persona_service.kernel.settings import load


@dataclass(frozen=True)
class Price:
    input_per_million: float
    output_per_million: float

    def cost_micros(self, input_tokens: int, output_tokens: int) -> int:
        return round(input_tokens * self.input_per_million + output_tokens * self.output_per_million)


DEFAULT_PRICES: dict[str, Price] = {
    "local-persona-1": Price(0.5, 1.5),
    "*": Price(0.0, 0.0),
}


class PriceTable:
    def __init__(self, prices: Mapping[str, Price]):
        self.prices = dict(prices)

    @classmethod
    def from_env(cls, settings: ChatSettings | None = None) -> PriceTable:
        """DEFAULT_PRICES with the configured prices (PERSONA_MODEL_PRICES) over them."""
        configured = (settings or load(ChatSettings)).model_prices
        return cls({**DEFAULT_PRICES, **{model: Price(p.input, p.output) for model, p in configured.items()}})

    def price(self, model: str) -> Price:
        return self.prices.get(model) or self.prices.get("*") or Price(0.0, 0.0)

    def cost_micros(self, model: str, input_tokens: int, output_tokens: int) -> int:
        return self.price(model).cost_micros(input_tokens, output_tokens)
