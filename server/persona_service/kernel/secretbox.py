"""Secrets at rest: Fernet (AES-128-CBC + HMAC-SHA256) under the server's
secrets key (PERSONA_SECRETS_KEY, or a key generated in the data dir)."""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken


class SecretBox:
    def __init__(self, key: str):
        self._fernet = Fernet(key.encode())
        self._cache: dict[str, str] = {}

    def seal(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def open(self, token: str) -> str:
        # Tokens are immutable, so decrypted values can be memoized (the
        # delivery worker opens the same endpoint's secret for every event).
        secret = self._cache.get(token)
        if secret is None:
            secret = self._fernet.decrypt(token.encode()).decode()
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[token] = secret
        return secret

    def seal_bytes(self, data: bytes) -> bytes:
        return self._fernet.encrypt(data)

    def open_bytes(self, token: bytes) -> bytes:
        return self._fernet.decrypt(token)


def open_or_legacy(box: SecretBox, token: bytes) -> bytes:
    """Data sealed by `seal_bytes`, or (rows written before sealing existed,
    gone within their retention window) the plaintext itself."""
    try:
        return box.open_bytes(token)
    except InvalidToken:
        return token
