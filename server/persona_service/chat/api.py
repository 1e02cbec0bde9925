"""What other modules may use of `chat` (its public surface): the model
price table (the personas module prices its generation cost preview with
it). Everything else in this folder is private to it."""

from persona_service.chat.pricing import PriceTable

__all__ = ["PriceTable"]
