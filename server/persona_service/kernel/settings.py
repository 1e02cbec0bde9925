"""Settings, read once from the environment."""

from __future__ import annotations

import os
import pathlib
import secrets
from dataclasses import dataclass, field


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@dataclass(frozen=True)
class Settings:
    data_dir: pathlib.Path = field(default_factory=lambda: pathlib.Path(os.environ.get("PERSONA_DATA_DIR", ".persona")).resolve())
    # External servers; empty means the embedded ones under data_dir.
    database_url: str = field(default_factory=lambda: os.environ.get("DATABASE_URL", ""))
    redis_url: str = field(default_factory=lambda: os.environ.get("REDIS_URL", ""))
    http_port: int = field(default_factory=lambda: _int("PERSONA_HTTP_PORT", 8080))
    grpc_port: int = field(default_factory=lambda: _int("PERSONA_GRPC_PORT", 50051))
    # Envoy's admin port, bound to 127.0.0.1 only.
    admin_port: int = field(default_factory=lambda: _int("PERSONA_ENVOY_ADMIN_PORT", 9901))
    grpc_workers: int = field(default_factory=lambda: _int("PERSONA_GRPC_WORKERS", 8))
    # gRPC server processes behind Envoy (ports PERSONA_GRPC_PORT, +1, ...):
    # the server is GIL-bound, so a second process adds throughput when a
    # core has room (measured +35-70% on 2 cores).
    server_processes: int = field(default_factory=lambda: _int("PERSONA_SERVER_PROCESSES", 2))
    db_pool_size: int = field(default_factory=lambda: _int("PERSONA_DB_POOL_SIZE", 16))
    # Seconds a verified credential is trusted without a database read.
    # Revocation is broadcast through Redis and evicts at once.
    auth_cache_seconds: int = field(default_factory=lambda: _int("PERSONA_AUTH_CACHE_SECONDS", 30))
    # Key prefix environment for `sk_live_` vs `sk_test_` defaults.
    jwt_secret: str = field(default_factory=lambda: os.environ.get("PERSONA_JWT_SECRET", ""))
    jwt_ttl_seconds: int = field(default_factory=lambda: _int("PERSONA_JWT_TTL_SECONDS", 3600))
    # Addresses whose X-Forwarded-For is trusted (the Envoy edge).
    trusted_proxies: tuple[str, ...] = field(
        default_factory=lambda: tuple(os.environ.get("PERSONA_TRUSTED_PROXIES", "127.0.0.1/32,::1/128").split(","))
    )
    log_level: str = field(default_factory=lambda: os.environ.get("PERSONA_LOG_LEVEL", "INFO"))
    # Fernet key encrypting stored secrets (webhook signing secrets); empty:
    # one generated and kept in the data dir.
    secrets_key: str = field(default_factory=lambda: os.environ.get("PERSONA_SECRETS_KEY", ""))
    # Webhooks: allow http:// and private/loopback destinations (local development and tests only).
    webhooks_allow_private: bool = field(default_factory=lambda: os.environ.get("PERSONA_WEBHOOKS_ALLOW_PRIVATE", "") in ("1", "true"))
    webhook_secret_max_age_seconds: int = field(
        default_factory=lambda: _int("PERSONA_WEBHOOK_SECRET_MAX_AGE_SECONDS", 90 * 86400)
    )
    webhook_secret_grace_seconds: int = field(
        default_factory=lambda: _int("PERSONA_WEBHOOK_SECRET_ROTATION_GRACE_SECONDS", 604800)
    )

    def resolved_jwt_secret(self) -> str:
        """The JWT signing secret: PERSONA_JWT_SECRET, else one kept in the data dir."""
        if self.jwt_secret:
            return self.jwt_secret
        return self._kept_secret("jwt-secret", lambda: secrets.token_urlsafe(48))

    def resolved_secrets_key(self) -> str:
        """The Fernet key for secrets at rest: PERSONA_SECRETS_KEY, else one kept in the data dir."""
        if self.secrets_key:
            return self.secrets_key
        import base64

        return self._kept_secret("secrets-key", lambda: base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())

    def _kept_secret(self, name: str, make) -> str:
        path = self.data_dir / name
        if not path.exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{name}.{os.getpid()}.tmp")
            tmp.write_text(make())
            tmp.chmod(0o600)
            try:
                os.link(tmp, path)  # first writer wins when processes race
            except FileExistsError:
                pass
            tmp.unlink()
        return path.read_text().strip()


def load() -> Settings:
    return Settings()
