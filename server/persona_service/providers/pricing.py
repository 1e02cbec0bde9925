"""Per-model prices, built in and from configuration: what the models the providers serve cost (chat bills
replies with it, personas price their generation's preview; both use it from here, neither from the other).

`PERSONA_MODEL_PRICES` holds JSON: model name → `{"input": <USD per million
input tokens>, "output": <USD per million output tokens>}`, over
DEFAULT_PRICES; a `"*"` entry prices any other model. A model with no price
(neither built in nor configured, and no `"*"`) is **unpriced**: its cost
counts as 0 but is reported as unknown (`ChatUsage.unpriced`, the startup
banner), never as a real $0. Since a price is in USD per million tokens,
tokens × price is the cost in micro-USD exactly; each reply's cost is
rounded to a whole micro-dollar.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from persona_service.kernel.settings import load
from persona_service.providers.settings import ProviderSettings


@dataclass(frozen=True)
class Price:
    input_per_million: float
    output_per_million: float

    def cost_micros(self, input_tokens: int, output_tokens: int) -> int:
        return round(input_tokens * self.input_per_million + output_tokens * self.output_per_million)


UNPRICED = Price(0.0, 0.0)

# Built-in prices, USD per million tokens (input, output): OpenAI's list prices for standard (not batch,
# not cached-input) use as published on openai.com/api/pricing, read 2025-06 (o3 after its June 2025 cut).
# Prices change: PERSONA_MODEL_PRICES overrides any of them.
DEFAULT_PRICES: dict[str, Price] = {
    # The offline local test model (an echo, no real cost): a fixed demo price, deliberately non-zero so that
    # cost counters, quotas on cost and the dashboard have something to show in tests and demos.
    "local-persona-1": Price(0.5, 1.5),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o3": Price(2.00, 8.00),
    "o3-mini": Price(1.10, 4.40),
    "o4-mini": Price(1.10, 4.40),
    "text-embedding-3-small": Price(0.02, 0.0),
    "text-embedding-3-large": Price(0.13, 0.0),
}

# A dated snapshot (`gpt-4o-mini-2024-07-18`, as OpenAI names the model that answered) costs what its alias does.
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class PriceTable:
    def __init__(self, prices: Mapping[str, Price]):
        self.prices = dict(prices)

    @classmethod
    def from_env(cls, settings: ProviderSettings | None = None) -> PriceTable:
        """DEFAULT_PRICES with the configured prices (PERSONA_MODEL_PRICES) over them."""
        configured = (settings or load(ProviderSettings)).model_prices
        return cls({**DEFAULT_PRICES, **{model: Price(p.input, p.output) for model, p in configured.items()}})

    def _find(self, model: str) -> Price | None:
        found = self.prices.get(model)
        if found is None and _SNAPSHOT.search(model):
            found = self.prices.get(_SNAPSHOT.sub("", model))
        return found if found is not None else self.prices.get("*")

    def priced(self, model: str) -> bool:
        """Whether the model has a price (its own, its alias's, or `"*"`); "" (no model: no call) counts as priced."""
        return not model or self._find(model) is not None

    def unpriced(self, models: Iterable[str]) -> list[str]:
        """The models of `models` without a price, in order, once each."""
        return list(dict.fromkeys(m for m in models if not self.priced(m)))

    def price(self, model: str) -> Price:
        """The model's price; UNPRICED (0) for a model without one (ask `priced` before calling it a cost)."""
        return self._find(model) or UNPRICED

    def cost_micros(self, model: str, input_tokens: int, output_tokens: int) -> int:
        return self.price(model).cost_micros(input_tokens, output_tokens)


def describe(chat_model: str, embedding_model: str = "", settings: ProviderSettings | None = None) -> str:
    """The startup banner's prices line: which configured models have no price (their cost reported unknown)."""
    table = PriceTable.from_env(settings)
    missing = table.unpriced([m for m in (chat_model, embedding_model) if m])
    if not missing:
        return "known for " + ", ".join(m for m in (chat_model, embedding_model) if m)
    return (f"none for {', '.join(missing)}: costs reported as unknown (`unpriced`), not $0; "
            f"set PERSONA_MODEL_PRICES (docs/configuration.md)")
