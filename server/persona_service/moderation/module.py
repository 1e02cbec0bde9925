"""Moderation: review items for every non-pass verdict, and `moderation.flagged`."""

from persona_service.kernel.module import Module

MODULE = Module(
    name="moderation",
    id_prefixes={"moderation_review": "mod"},
    event_types=frozenset({"moderation.flagged"}),
)
