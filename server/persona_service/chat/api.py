"""What other modules may use of `chat` (its public surface): nothing today. The model price table the
personas module prices its generation preview with lives in `providers.pricing`, below both, so that
personas and chat do not import each other both ways. Everything in this folder is private to it."""

__all__: list[str] = []
