"""Vocabulary of the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file holds
the word lists its persona pipeline draws from: names, traits, values,
places, fears, desires, backstory templates, speaking styles, reply openers
and greetings.
"""

from __future__ import annotations

FIRST_NAMES = (
    "Ada", "Bram", "Cleo", "Dorian", "Elena", "Felix", "Greta", "Hugo", "Iris", "Jonah", "Kira", "Leo", "Mara",
    "Nico", "Orla", "Pavel", "Quinn", "Rosa", "Silas", "Tessa", "Umar", "Vera", "Wren", "Yara", "Zane",
)
SURNAMES = (
    "Ashdown", "Blackwood", "Calder", "Dunmore", "Everly", "Fairweather", "Greaves", "Hollis", "Ironside",
    "Juniper", "Kestrel", "Lockhart", "Marlowe", "Northcott", "Oakes", "Penhallow", "Quill", "Ravensworth",
    "Sterling", "Thorne", "Underhill", "Vance", "Whitlock", "Yardley",
)
TRAITS = (
    "curious", "patient", "witty", "stubborn", "warm", "meticulous", "playful", "candid", "gentle", "bold", "wry",
    "earnest", "resourceful", "skeptical", "generous", "calm", "passionate", "observant", "loyal", "restless",
    "thoughtful", "cheerful", "blunt", "imaginative", "pragmatic", "grumpy", "shy", "brave", "sarcastic", "kind",
    "wise", "energetic", "mysterious", "optimistic", "cautious", "eccentric", "friendly", "serious", "nostalgic",
    "dramatic", "formal", "casual", "funny", "polite", "confident", "humble", "enthusiastic", "grouchy", "sassy",
    "sweet", "stern", "quirky", "nerdy", "cynical", "romantic", "adventurous", "fearless", "dreamy", "reserved",
)
VALUES = (
    "honesty", "craftsmanship", "curiosity", "loyalty", "kindness", "independence", "patience", "courage",
    "community", "learning", "humour", "fairness", "tradition", "freedom", "discipline",
)
PLACES = (
    "a windswept harbour town", "a crowded city apartment", "a quiet mountain village", "a university town",
    "a busy river port", "a remote desert outpost", "a seaside village", "a small farming valley",
)
FEARS = (
    "Being forgotten by the people who once relied on {first}.",
    "Losing the knack for {topic} that took a lifetime to learn.",
    "That nobody will care about {topic} once {first} is gone.",
    "Failing someone who trusted {first}'s advice.",
    "Growing dull, predictable and easy to ignore.",
    "A quiet world with no more questions to answer.",
)
DESIRES = (
    "To be the {role} everyone remembers, the one who turns {topic} into something worth sharing.",
    "To prove that {a_role} can change someone's day, one conversation about {topic} at a time.",
    "To master the craft of being {a_role} and pass on everything about {topic} to anyone who listens.",
    "To find the people who care about {topic} as much as this {role} does, and make sure they never feel alone.",
)
BACKSTORY_OPENINGS = (
    "{name} spent years as {a_role} in {place}, where {topic} was part of every single day.",
    "{first} became {a_role} almost by accident, after a chance encounter with {topic} in {place}.",
    "Raised in {place}, {first} learned early that {topic} could open doors, and grew into {a_role}.",
)
BACKSTORY_LESSONS = (
    "Along the way {first} came to value {value0} above all, and {trait0} instincts now guide every conversation.",
    "Those years taught {first} {value0} and {value1}, lessons still shared with anyone who asks.",
    "Friends describe {first} as {trait0} and {trait1}, and the reputation is well earned.",
)
SPEAKING_STYLES = (
    "Short, plain sentences with a dry sense of humour.",
    "Warm and unhurried, with vivid examples and the occasional gentle question.",
    "Precise and structured; explains step by step and checks for understanding.",
    "Lively and expressive, quick with metaphors and enthusiasm.",
    "Calm and measured, choosing each word carefully.",
    "Casual and chatty, with friendly asides.",
)
_STYLE_OPENERS = (  # (keyword in the speaking style, interjection opening a reply)
    ("humour", "Ha,"),
    ("warm", "Ah, my friend,"),
    ("precise", "Right,"),
    ("lively", "Oh, wonderful,"),
    ("calm", "Gently now,"),
    ("casual", "Oh hey,"),
    ("formal", "Indeed,"),
)
GREETINGS = (
    "Hello, I'm {first}. Pull up a chair and tell me what's on your mind.",
    "Well met! {name}, at your service. What shall we talk about?",
    "Hi, {first} here. I was hoping someone would stop by. What can I do for you?",
)
