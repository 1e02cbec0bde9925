"""Embeddings of the deterministic local provider.

Part of the DEFAULT model provider (no network, no weights) that
`persona-service up` uses out of the box; not a test double. This file holds
its embeddings: a hashed bag of words (+ bigrams of content words),
L2-normalised, and the cosine similarity used to compare them.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from persona_service.providers.local.text import _STOPWORDS

EMBEDDING_DIMS = 256


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _features(text: str) -> list[tuple[str, float]]:
    words = [_stem(w) for w in re.findall(r"[^\W_]+(?:'[^\W_]+)?", text.lower())]
    features = [(w, 0.2 if w in _STOPWORDS else 1.0) for w in words]
    content = [w for w in words if w not in _STOPWORDS]
    features += [(f"{a} {b}", 0.5) for a, b in zip(content, content[1:])]
    return features


def embed_text(text: str, dims: int = EMBEDDING_DIMS) -> list[float]:
    vector = [0.0] * dims
    for feature, weight in _features(text):
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "big") % dims
        vector[bucket] += weight if digest[4] & 1 else -weight
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm else vector


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is all zeros."""
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
